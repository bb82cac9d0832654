"""Production shapes: PgBouncer, many hosts on one database, the job tables on their own database."""

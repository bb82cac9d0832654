"""The pure core: enums, value types and policies. No ORM, no clock, no I/O, no settings."""

"""The example project's Django site: settings from the environment, the admin at /admin/."""

from heat_health.resources import resource_mapping  # noqa

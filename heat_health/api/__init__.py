"""The heat-health paste filter for Heat's API pipeline."""

from heat_health.api import middleware


def filter_factory(global_conf, **local_conf):
    """paste.filter_factory: ``[filter:heat_health]`` in api-paste.ini."""
    return middleware.HealthMiddleware

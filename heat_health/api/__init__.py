"""The heat-health paste filter for Heat's API pipeline."""


def filter_factory(global_conf, **local_conf):
    """paste.filter_factory: ``[filter:heat_health]`` in api-paste.ini."""
    from heat_health.api import middleware

    def _filter(app):
        return middleware.HealthMiddleware(app)
    return _filter

"""Observing servers: the health monitor of heat-health-engine.

Shaped as a reconcile loop: the desired state is the registered policies
and their targets (``heat_health.engine.ownership.registry``), the actual
state is what the detectors observe; ``states`` decides each target's
health from those observations, and every change is recorded and
announced.
"""

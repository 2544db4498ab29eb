"""Waits that hold the engine's shared workers have maxima.

A value above one is refused with the property's range; a value stored
before the maxima existed is read as the maximum.
"""

from heat.common import exception
from oslo_serialization import jsonutils

from heat_health.common import lb_members
from heat_health.resources import load_balancer


def test_lb_status_timeout_above_the_maximum_is_refused():
    schema = load_balancer.LoadBalancer.properties_schema[
        load_balancer.LoadBalancer.LB_STATUS_TIMEOUT]
    schema.validate_constraints(lb_members.MAX_STATUS_TIMEOUT)
    try:
        schema.validate_constraints(lb_members.MAX_STATUS_TIMEOUT + 1)
    except exception.StackValidationFailed as ex:
        assert '1801 is out of range (min: 1, max: 1800)' in str(ex)
    else:
        raise AssertionError('lb_status_timeout 1801 was accepted')


def test_stored_lb_status_timeout_is_read_as_the_maximum():
    def data(timeout):
        return {lb_members.DATA_SPEC: jsonutils.dumps(
            {'pool_id': 'pool-1', 'protocol_port': 80,
             'lb_status_timeout': timeout})}
    assert lb_members.read_data(data(86400))['lb_status_timeout'] == 1800
    assert lb_members.read_data(data(300))['lb_status_timeout'] == 300
    spec = lb_members.read_data({lb_members.DATA_SPEC: jsonutils.dumps(
        {'pool_id': 'pool-1', 'protocol_port': 80})})
    assert 'lb_status_timeout' not in spec

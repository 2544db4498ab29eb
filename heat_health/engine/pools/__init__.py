"""Keeping load balancer pools in step with the servers of their groups.

``lb_follow`` sends each pool its members; ``lb_drain`` takes a server's
weight away before it is acted on and gives it back after.
"""

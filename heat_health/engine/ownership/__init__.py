"""Which policies this engine owns, and the targets each one watches.

What every loop shares: ``partition`` places policies on the engines'
hash ring, ``registry`` claims them with fenced leases and keeps their
targets in step with their stacks.
"""

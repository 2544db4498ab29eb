"""What every loop shares: the policies this engine owns, and what they read.

``partition`` places policies on the engines' hash ring, ``registry``
claims them with fenced leases and keeps their targets in step with their
stacks, and ``lb_pools`` reads which pools their stacks' load balancers
keep.
"""

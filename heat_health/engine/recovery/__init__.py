"""Acting on servers: recoveries chosen, stored, then carried out.

``planner`` decides the next step of each target from what is stored,
``loop`` stores each stage before its effect and carries it out, through
thin adapters to Nova (``nova_actions``) and Heat (``heat_replace``).
"""

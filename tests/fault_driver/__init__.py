"""A Nova virt driver with faults, for the local deployment's real Nova."""

"""Deterministic simulation of the acting core (see world.World)."""

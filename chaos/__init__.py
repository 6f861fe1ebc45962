"""Soak and chaos testing of runsgate (docs/chaos.md): N instances on one store, a workload of
runs and decisions, faults from a seeded schedule, and a checker that reads the whole history."""

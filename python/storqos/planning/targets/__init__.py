"""The settings of the QoS systems operators run, in each system's own syntax, from a
spec of its model (:mod:`storqos_core::stacks`): what ``storqos advise --target`` prints
and what the live checks start the real systems with."""

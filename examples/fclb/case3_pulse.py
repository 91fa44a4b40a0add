"""Seed 003 §4.5, case 3: one workload pulses 5 s on / 5 s off; a response-time spike at
every burst that subsides within two or three windows (the paper: 12/6 % and 3/19 %).
Run: python examples/fclb/case3_pulse.py"""

from _common import main

if __name__ == "__main__":
    main(["pulse-w2", "pulse-w1"])

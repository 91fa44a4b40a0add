"""Seed 003 §4.5, case 2: one workload starts after 30 s; the other gives the disk back
within a few control periods (the paper: violations below 3 %).
Run: python examples/fclb/case2_step.py"""

from _common import main

if __name__ == "__main__":
    main(["step-w2", "step-w1"])

"""Seed 003 §4.5, case 4: both workloads active; throughput 2:1 as the YFQ weights,
violations below 3 % in the paper. Run: python examples/fclb/case4_both_active.py"""

from _common import main

if __name__ == "__main__":
    main(["both"])

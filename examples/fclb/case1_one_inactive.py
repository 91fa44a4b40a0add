"""Seed 003 §4.5, case 1: one workload inactive; the other should take the disk's
surplus (the paper: 72 IOPS, 5 % violations). Run: python examples/fclb/case1_one_inactive.py"""

from _common import main

if __name__ == "__main__":
    main(["inactive-w2", "inactive-w1"])

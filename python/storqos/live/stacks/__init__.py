"""The real QoS systems on this machine, started for a live check of their models:
QEMU's qemu-storage-daemon, nbdkit, and the kernel's blk-cgroup over loop devices."""

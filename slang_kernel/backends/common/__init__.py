"""What the backends share: parameter packing (packing), out-of-range reports (bounds), shared
memory (shm), interruptible waits (wait) and printf text (printing)."""

//! `datasets.lock`: every dataset file pinned by size and sha256.

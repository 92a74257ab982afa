"""Launch files and configuration for bcg on the G1 (see launch/ and config/ at the repository root)."""

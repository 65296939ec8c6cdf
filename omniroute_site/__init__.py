"""OmniRoute site wiring."""

//! ext-adapters.

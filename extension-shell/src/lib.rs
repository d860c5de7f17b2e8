//! extension-shell.

//! Placeholder: filled in by issue 34's work.

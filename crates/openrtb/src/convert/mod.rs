//! Placeholder: filled in by issue 34's work (OpenRTB 2.5 <-> 2.6).

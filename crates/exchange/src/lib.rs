//! exchange: placeholder, filled in below.

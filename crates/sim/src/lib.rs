//! sim: placeholder, filled in below.

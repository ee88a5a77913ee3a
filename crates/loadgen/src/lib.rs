//! loadgen: placeholder, filled in below.

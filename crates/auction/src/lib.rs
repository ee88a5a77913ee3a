//! auction: placeholder, filled in below.

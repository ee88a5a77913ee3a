//! Any bytes, as one line of a record file or one NATS message (`records::from_line`): never
//! panics; a refusal is `TooLong` exactly past `MAX_LINE_BYTES`; an accepted record is of a
//! version this build reads, and re-encodes (`to_line`) to a line that reads back to the same
//! record, whose encoding is then stable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use records::{MAX_LINE_BYTES, RecordError, VERSION, from_line, to_line};

fuzz_target!(|data: &[u8]| {
    match from_line(data) {
        Err(RecordError::TooLong(n)) => assert!(n > MAX_LINE_BYTES && n == data.len()),
        Err(e) => {
            assert!(data.len() <= MAX_LINE_BYTES);
            assert!(!e.to_string().is_empty());
        }
        Ok(record) => {
            assert!(record.version() <= VERSION);
            let mut line = Vec::new();
            to_line(&record, &mut line).expect("an accepted record encodes");
            let again = from_line(&line).expect("an encoded record reads back");
            assert_eq!(again, record);
            let mut twice = Vec::new();
            to_line(&again, &mut twice).expect("encodes again");
            assert_eq!(twice, line, "encoding is stable");
        }
    }
});

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Loading request bodies from files and directories.

use loadgen::{Corpus, LoadError};
use testkit::TempDir;

fn bodies(c: &Corpus) -> Vec<String> {
    c.bodies()
        .iter()
        .map(|b| String::from_utf8(b.to_vec()).unwrap())
        .collect()
}

#[test]
fn json_lines() {
    let dir = TempDir::new("jsonl");
    let f = dir.file(
        "reqs.jsonl",
        "{\"id\":\"a\"}\n\n  {\"id\":\"b\"}  \r\n{\"id\":\"c\"}\n",
    );
    let c = Corpus::from_path(&f).unwrap();
    assert_eq!(c.len(), 3);
    assert_eq!(
        bodies(&c),
        ["{\"id\":\"a\"}", "{\"id\":\"b\"}", "{\"id\":\"c\"}"]
    );
}

#[test]
fn single_pretty_document_is_one_body_sent_as_written() {
    let dir = TempDir::new("single");
    let doc = "{\n  \"id\": \"a\",\n  \"imp\": [\n    {\"id\": \"1\"}\n  ]\n}";
    let f = dir.file("one.json", &format!("\n{doc}\n\n"));
    let c = Corpus::from_path(&f).unwrap();
    assert_eq!(bodies(&c), [doc]);
}

#[test]
fn directory_takes_json_files_in_name_order() {
    let dir = TempDir::new("dir");
    dir.file("b.json", "{\"id\":\"b1\"}\n{\"id\":\"b2\"}\n");
    dir.file("a.json", "{\n \"id\": \"a\"\n}\n");
    dir.file("notes.txt", "not json at all");
    dir.file("c.json.bak", "{");
    std::fs::create_dir(dir.join("sub.json")).unwrap();
    let c = Corpus::from_path(dir.path()).unwrap();
    assert_eq!(
        bodies(&c),
        ["{\n \"id\": \"a\"\n}", "{\"id\":\"b1\"}", "{\"id\":\"b2\"}"]
    );
}

#[test]
fn invalid_line_names_file_and_line() {
    let dir = TempDir::new("badline");
    let f = dir.file(
        "reqs.jsonl",
        "{\"id\":\"a\"}\n{\"id\":\"b\"}\n\n{\"id\": oops}\n{\"id\":\"d\"}\n",
    );
    let e = Corpus::from_path(&f).unwrap_err();
    match &e {
        LoadError::InvalidJson { path, line, .. } => {
            assert_eq!(path, &f);
            assert_eq!(*line, 4);
        }
        other => panic!("expected InvalidJson, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("reqs.jsonl") && msg.contains("line 4"),
        "{msg}"
    );
    assert!(
        !msg.contains("at line 1 column"),
        "position given twice: {msg}"
    );
}

#[test]
fn broken_pretty_document_names_its_line() {
    let dir = TempDir::new("baddoc");
    let f = dir.file(
        "one.json",
        "{\n  \"id\": \"a\",\n  \"imp\": [\n    {\"id\": 1,}\n  ]\n}\n",
    );
    let e = Corpus::from_path(&f).unwrap_err();
    assert!(matches!(e, LoadError::InvalidJson { line: 4, .. }), "{e:?}");
}

#[test]
fn invalid_file_in_directory_is_named() {
    let dir = TempDir::new("dirbad");
    dir.file("a.json", "{\"id\":\"a\"}");
    let bad = dir.file("b.json", "{\"id\":\"b\"}\n{nope\n");
    let e = Corpus::from_path(dir.path()).unwrap_err();
    match e {
        LoadError::InvalidJson { path, line, .. } => assert_eq!((path, line), (bad, 2)),
        other => panic!("expected InvalidJson, got {other:?}"),
    }
}

#[test]
fn empty_inputs_are_errors() {
    let dir = TempDir::new("empty");
    let f = dir.file("blank.json", " \n\n ");
    let e = Corpus::from_path(&f).unwrap_err();
    assert!(matches!(e, LoadError::EmptyCorpus { .. }), "{e:?}");
    assert!(e.to_string().contains("blank.json"), "{e}");

    let sub = dir.join("nothing");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("readme.txt"), "hi").unwrap();
    let e = Corpus::from_path(&sub).unwrap_err();
    assert!(matches!(e, LoadError::EmptyCorpus { .. }), "{e:?}");
    assert!(e.to_string().contains("nothing"), "{e}");
}

#[test]
fn missing_path_is_an_io_error_naming_it() {
    let dir = TempDir::new("missing");
    let p = dir.join("no-such-file.json");
    let e = Corpus::from_path(&p).unwrap_err();
    assert!(matches!(e, LoadError::Io { .. }), "{e:?}");
    assert!(e.to_string().contains("no-such-file.json"), "{e}");
}

/// A body's `tmax` is its deadline; anything but a positive whole number of milliseconds is
/// no deadline (the request then waits at most the timeout).
#[test]
fn each_body_s_tmax_is_read_once() {
    let corpus = Corpus::from_bodies(
        [
            r#"{"id":"a","tmax":120}"#,
            r#"{"id":"b"}"#,
            r#"{"id":"c","tmax":0}"#,
            r#"{"id":"d","tmax":"100"}"#,
            r#"{"id":"e","tmax":1.5}"#,
            "[1,2,3]",
            "not json",
        ]
        .into_iter()
        .map(|b| bytes::Bytes::from_static(b.as_bytes()))
        .collect(),
    );
    let tmax: Vec<Option<u64>> = (0..7)
        .map(|i| corpus.tmax(i).map(|d| d.as_millis() as u64))
        .collect();
    assert_eq!(tmax, [Some(120), None, None, None, None, None, None]);
    // Round robin, as the bodies are.
    assert_eq!(corpus.tmax(7), Some(std::time::Duration::from_millis(120)));
    let generated = Corpus::generated(7, 10, 250);
    assert!((0..10).all(|i| generated.tmax(i) == Some(std::time::Duration::from_millis(250))));
}

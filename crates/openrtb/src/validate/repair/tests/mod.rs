//! `repair`'s tests: the table of repairs, each with its exact result (`table.rs`); every rule of
//! `validate`'s own table repaired or refused as the module documentation says (`table.rs`);
//! native request strings written back (`native.rs`); properties over the spec examples and
//! random faults (`props.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod native;
mod props;
mod table;

use serde_json::Value;

use super::super::tests::Mutation;
use super::Repaired;

/// Removes the member at a JSON pointer whose parent is an object.
fn remove(pointer: &'static str) -> Mutation {
    Box::new(move |v: &mut Value| {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        v.pointer_mut(parent)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove(key);
    })
}

/// `first`, then `then`.
fn both(first: Mutation, then: Mutation) -> Mutation {
    Box::new(move |v: &mut Value| {
        first(v);
        then(v);
    })
}

fn unchanged() -> Mutation {
    Box::new(|_: &mut Value| {})
}

/// A JSON path without its indices: `imp[0].banner.format[1]` -> `imp.banner.format`.
fn without_indices(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            _ if !in_index => out.push(c),
            _ => {}
        }
    }
    out
}

/// `(field, path, action label)` of each repair, for comparisons and messages.
fn summary(done: &[Repaired]) -> Vec<(String, String, &'static str)> {
    done.iter()
        .map(|r| (r.field.to_owned(), r.path.clone(), r.action.label()))
        .collect()
}

#[test]
fn labels_are_paths_without_indices() {
    assert_eq!(
        without_indices("imp[12].native.request.assets[3].id"),
        "imp.native.request.assets.id"
    );
    assert_eq!(without_indices("device.geo.lat"), "device.geo.lat");
}

//! The keys each OpenRTB 2.5 request object defines (OpenRTB API Specification 2.5, section
//! 3.2, December 2016), written from that text independently of the converter's own tables, and
//! a walk that lists every key of a JSON request that a strict 2.5 bidder would not know.
//!
//! 2.5 still lists a few fields that 2.6 removed (`banner.wmax`/`hmax`/`wmin`/`hmin`,
//! `video.protocol`, `content.videoquality`): they are 2.5 keys. `ext` is free-form in every
//! object and is not walked.

use serde_json::Value;

/// What a key holds.
#[derive(Clone, Copy)]
enum Kind {
    /// A number, string or array of them.
    Scalar,
    /// One object of the named type.
    Object(&'static str),
    /// An array of objects of the named type.
    Objects(&'static str),
    /// `ext`: anything.
    Ext,
}

use Kind::{Ext, Object, Objects, Scalar};

/// `(object type, its 2.5 keys)`.
const OBJECTS_2_5: &[(&str, &[(&str, Kind)])] = &[
    (
        "BidRequest",
        &[
            ("id", Scalar),
            ("imp", Objects("Imp")),
            ("site", Object("Site")),
            ("app", Object("App")),
            ("device", Object("Device")),
            ("user", Object("User")),
            ("test", Scalar),
            ("at", Scalar),
            ("tmax", Scalar),
            ("wseat", Scalar),
            ("bseat", Scalar),
            ("allimps", Scalar),
            ("cur", Scalar),
            ("wlang", Scalar),
            ("bcat", Scalar),
            ("badv", Scalar),
            ("bapp", Scalar),
            ("source", Object("Source")),
            ("regs", Object("Regs")),
            ("ext", Ext),
        ],
    ),
    (
        "Source",
        &[
            ("fd", Scalar),
            ("tid", Scalar),
            ("pchain", Scalar),
            ("ext", Ext),
        ],
    ),
    ("Regs", &[("coppa", Scalar), ("ext", Ext)]),
    (
        "Imp",
        &[
            ("id", Scalar),
            ("metric", Objects("Metric")),
            ("banner", Object("Banner")),
            ("video", Object("Video")),
            ("audio", Object("Audio")),
            ("native", Object("Native")),
            ("pmp", Object("Pmp")),
            ("displaymanager", Scalar),
            ("displaymanagerver", Scalar),
            ("instl", Scalar),
            ("tagid", Scalar),
            ("bidfloor", Scalar),
            ("bidfloorcur", Scalar),
            ("clickbrowser", Scalar),
            ("secure", Scalar),
            ("iframebuster", Scalar),
            ("exp", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Metric",
        &[
            ("type", Scalar),
            ("value", Scalar),
            ("vendor", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Banner",
        &[
            ("format", Objects("Format")),
            ("w", Scalar),
            ("h", Scalar),
            ("wmax", Scalar),
            ("hmax", Scalar),
            ("wmin", Scalar),
            ("hmin", Scalar),
            ("btype", Scalar),
            ("battr", Scalar),
            ("pos", Scalar),
            ("mimes", Scalar),
            ("topframe", Scalar),
            ("expdir", Scalar),
            ("api", Scalar),
            ("id", Scalar),
            ("vcm", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Video",
        &[
            ("mimes", Scalar),
            ("minduration", Scalar),
            ("maxduration", Scalar),
            ("protocols", Scalar),
            ("protocol", Scalar),
            ("w", Scalar),
            ("h", Scalar),
            ("startdelay", Scalar),
            ("placement", Scalar),
            ("linearity", Scalar),
            ("skip", Scalar),
            ("skipmin", Scalar),
            ("skipafter", Scalar),
            ("sequence", Scalar),
            ("battr", Scalar),
            ("maxextended", Scalar),
            ("minbitrate", Scalar),
            ("maxbitrate", Scalar),
            ("boxingallowed", Scalar),
            ("playbackmethod", Scalar),
            ("playbackend", Scalar),
            ("delivery", Scalar),
            ("pos", Scalar),
            ("companionad", Objects("Banner")),
            ("api", Scalar),
            ("companiontype", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Audio",
        &[
            ("mimes", Scalar),
            ("minduration", Scalar),
            ("maxduration", Scalar),
            ("protocols", Scalar),
            ("startdelay", Scalar),
            ("sequence", Scalar),
            ("battr", Scalar),
            ("maxextended", Scalar),
            ("minbitrate", Scalar),
            ("maxbitrate", Scalar),
            ("delivery", Scalar),
            ("companionad", Objects("Banner")),
            ("api", Scalar),
            ("companiontype", Scalar),
            ("maxseq", Scalar),
            ("feed", Scalar),
            ("stitched", Scalar),
            ("nvol", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Native",
        &[
            ("request", Scalar),
            ("ver", Scalar),
            ("api", Scalar),
            ("battr", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Format",
        &[
            ("w", Scalar),
            ("h", Scalar),
            ("wratio", Scalar),
            ("hratio", Scalar),
            ("wmin", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Pmp",
        &[
            ("private_auction", Scalar),
            ("deals", Objects("Deal")),
            ("ext", Ext),
        ],
    ),
    (
        "Deal",
        &[
            ("id", Scalar),
            ("bidfloor", Scalar),
            ("bidfloorcur", Scalar),
            ("at", Scalar),
            ("wseat", Scalar),
            ("wadomain", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Site",
        &[
            ("id", Scalar),
            ("name", Scalar),
            ("domain", Scalar),
            ("cat", Scalar),
            ("sectioncat", Scalar),
            ("pagecat", Scalar),
            ("page", Scalar),
            ("ref", Scalar),
            ("search", Scalar),
            ("mobile", Scalar),
            ("privacypolicy", Scalar),
            ("publisher", Object("Publisher")),
            ("content", Object("Content")),
            ("keywords", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "App",
        &[
            ("id", Scalar),
            ("name", Scalar),
            ("bundle", Scalar),
            ("domain", Scalar),
            ("storeurl", Scalar),
            ("cat", Scalar),
            ("sectioncat", Scalar),
            ("pagecat", Scalar),
            ("ver", Scalar),
            ("privacypolicy", Scalar),
            ("paid", Scalar),
            ("publisher", Object("Publisher")),
            ("content", Object("Content")),
            ("keywords", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Publisher",
        &[
            ("id", Scalar),
            ("name", Scalar),
            ("cat", Scalar),
            ("domain", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Content",
        &[
            ("id", Scalar),
            ("episode", Scalar),
            ("title", Scalar),
            ("series", Scalar),
            ("season", Scalar),
            ("artist", Scalar),
            ("genre", Scalar),
            ("album", Scalar),
            ("isrc", Scalar),
            ("producer", Object("Producer")),
            ("url", Scalar),
            ("cat", Scalar),
            ("prodq", Scalar),
            ("videoquality", Scalar),
            ("context", Scalar),
            ("contentrating", Scalar),
            ("userrating", Scalar),
            ("qagmediarating", Scalar),
            ("keywords", Scalar),
            ("livestream", Scalar),
            ("sourcerelationship", Scalar),
            ("len", Scalar),
            ("language", Scalar),
            ("embeddable", Scalar),
            ("data", Objects("Data")),
            ("ext", Ext),
        ],
    ),
    (
        "Producer",
        &[
            ("id", Scalar),
            ("name", Scalar),
            ("cat", Scalar),
            ("domain", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Device",
        &[
            ("ua", Scalar),
            ("geo", Object("Geo")),
            ("dnt", Scalar),
            ("lmt", Scalar),
            ("ip", Scalar),
            ("ipv6", Scalar),
            ("devicetype", Scalar),
            ("make", Scalar),
            ("model", Scalar),
            ("os", Scalar),
            ("osv", Scalar),
            ("hwv", Scalar),
            ("h", Scalar),
            ("w", Scalar),
            ("ppi", Scalar),
            ("pxratio", Scalar),
            ("js", Scalar),
            ("geofetch", Scalar),
            ("flashver", Scalar),
            ("language", Scalar),
            ("carrier", Scalar),
            ("mccmnc", Scalar),
            ("connectiontype", Scalar),
            ("ifa", Scalar),
            ("didsha1", Scalar),
            ("didmd5", Scalar),
            ("dpidsha1", Scalar),
            ("dpidmd5", Scalar),
            ("macsha1", Scalar),
            ("macmd5", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "Geo",
        &[
            ("lat", Scalar),
            ("lon", Scalar),
            ("type", Scalar),
            ("accuracy", Scalar),
            ("lastfix", Scalar),
            ("ipservice", Scalar),
            ("country", Scalar),
            ("region", Scalar),
            ("regionfips104", Scalar),
            ("metro", Scalar),
            ("city", Scalar),
            ("zip", Scalar),
            ("utcoffset", Scalar),
            ("ext", Ext),
        ],
    ),
    (
        "User",
        &[
            ("id", Scalar),
            ("buyeruid", Scalar),
            ("yob", Scalar),
            ("gender", Scalar),
            ("keywords", Scalar),
            ("customdata", Scalar),
            ("geo", Object("Geo")),
            ("data", Objects("Data")),
            ("ext", Ext),
        ],
    ),
    (
        "Data",
        &[
            ("id", Scalar),
            ("name", Scalar),
            ("segment", Objects("Segment")),
            ("ext", Ext),
        ],
    ),
    (
        "Segment",
        &[
            ("id", Scalar),
            ("name", Scalar),
            ("value", Scalar),
            ("ext", Ext),
        ],
    ),
];

/// Every key of `request` (a decoded JSON bid request) unknown to OpenRTB 2.5, as a path
/// (`imp[0].video.poddur`). Values of the wrong shape (an object where the spec has a scalar)
/// are listed too, as `path (shape)`.
pub fn keys_unknown_to_2_5(request: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    walk(request, "BidRequest", "", &mut unknown);
    unknown
}

fn walk(value: &Value, object_type: &str, path: &str, unknown: &mut Vec<String>) {
    let Some((_, keys)) = OBJECTS_2_5.iter().find(|(name, _)| *name == object_type) else {
        panic!("no 2.5 object type {object_type}");
    };
    let Some(object) = value.as_object() else {
        unknown.push(format!("{path} (not an object)"));
        return;
    };
    for (key, child) in object {
        let child_path = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        match keys.iter().find(|(k, _)| k == key).map(|(_, kind)| *kind) {
            None => unknown.push(child_path),
            Some(Ext) => {}
            Some(Scalar) => {
                let scalars = match child {
                    Value::Array(items) => items.iter().all(|i| !i.is_object() && !i.is_array()),
                    Value::Object(_) => false,
                    _ => true,
                };
                if !scalars {
                    unknown.push(format!("{child_path} (shape)"));
                }
            }
            Some(Object(name)) => walk(child, name, &child_path, unknown),
            Some(Objects(name)) => match child.as_array() {
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        walk(item, name, &format!("{child_path}[{i}]"), unknown);
                    }
                }
                None => unknown.push(format!("{child_path} (not an array)")),
            },
        }
    }
}

/// The walker itself: it must see a 2.6 key at every depth, or it could be blind.
#[test]
fn the_walk_finds_2_6_keys_at_every_level() {
    let request: Value = serde_json::from_str(
        r#"{"id":"r","imp":[{"id":"1","rwdd":1,"video":{"mimes":[],"poddur":30,"companionad":[{"w":1,"vcm":1,"x":1}]},"pmp":{"deals":[{"id":"d","guar":1}]}}],"app":{"content":{"langb":"en","data":[{"cids":[]}]},"ext":{"anything":{"goes":1}}},"user":{"eids":[]},"device":{"sua":{}},"regs":{"gdpr":1},"source":{"schain":{}},"dooh":{}}"#,
    )
    .expect("json");
    let mut found = keys_unknown_to_2_5(&request);
    found.sort();
    assert_eq!(
        found,
        [
            "app.content.data[0].cids",
            "app.content.langb",
            "device.sua",
            "dooh",
            "imp[0].pmp.deals[0].guar",
            "imp[0].rwdd",
            "imp[0].video.companionad[0].x",
            "imp[0].video.poddur",
            "regs.gdpr",
            "source.schain",
            "user.eids",
        ]
    );
}

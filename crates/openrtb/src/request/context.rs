//! Where the impression appears: the distribution channel (`Site`, `App` or `Dooh`, at most one
//! per request), its publisher, and the content around the ad (3.2.13 - 3.2.17, 3.2.23,
//! 3.2.24, 3.2.32).

use crate::enums::{CategoryTaxonomy, ContentContext, MediaRating, ProductionQuality};
use crate::object::openrtb_object;

use super::user::Data;

openrtb_object! {
    /// A website (3.2.13).
    pub struct Site {
        required {}
        optional {
            id: String = "id",
            name: String = "name",
            domain: String = "domain",
            cattax: CategoryTaxonomy = "cattax",
            cat: Vec<String> = "cat",
            sectioncat: Vec<String> = "sectioncat",
            pagecat: Vec<String> = "pagecat",
            page: String = "page",
            /// Referrer URL (`ref` is a Rust keyword, hence the raw identifier).
            r#ref: String = "ref",
            search: String = "search",
            mobile: i32 = "mobile",
            privacypolicy: i32 = "privacypolicy",
            publisher: Publisher = "publisher",
            content: Content = "content",
            keywords: String = "keywords",
            kwarray: Vec<String> = "kwarray",
            inventorypartnerdomain: String = "inventorypartnerdomain",
        }
    }
}

openrtb_object! {
    /// A non-browser application (3.2.14).
    pub struct App {
        required {}
        optional {
            id: String = "id",
            name: String = "name",
            /// Store ID of the app (package name on Google Play, numeric ID on the App Store).
            bundle: String = "bundle",
            domain: String = "domain",
            storeurl: String = "storeurl",
            cattax: CategoryTaxonomy = "cattax",
            cat: Vec<String> = "cat",
            sectioncat: Vec<String> = "sectioncat",
            pagecat: Vec<String> = "pagecat",
            ver: String = "ver",
            privacypolicy: i32 = "privacypolicy",
            paid: i32 = "paid",
            publisher: Publisher = "publisher",
            content: Content = "content",
            keywords: String = "keywords",
            kwarray: Vec<String> = "kwarray",
            inventorypartnerdomain: String = "inventorypartnerdomain",
        }
    }
}

openrtb_object! {
    /// A digital out-of-home screen (3.2.32).
    pub struct Dooh {
        required {}
        optional {
            id: String = "id",
            name: String = "name",
            venuetype: Vec<String> = "venuetype",
            /// Venue taxonomy in use (AdCOM List: Venue Taxonomies); absent means 1.
            venuetypetax: i32 = "venuetypetax",
            publisher: Publisher = "publisher",
            domain: String = "domain",
            keywords: String = "keywords",
            content: Content = "content",
        }
    }
}

openrtb_object! {
    /// The seller paid for the inventory (3.2.15); `id` matches sellers.json `seller_id`.
    pub struct Publisher {
        required {}
        optional {
            id: String = "id",
            name: String = "name",
            cattax: CategoryTaxonomy = "cattax",
            cat: Vec<String> = "cat",
            domain: String = "domain",
        }
    }
}

openrtb_object! {
    /// The content in which the ad appears (3.2.16).
    pub struct Content {
        required {}
        optional {
            id: String = "id",
            episode: i32 = "episode",
            title: String = "title",
            series: String = "series",
            season: String = "season",
            artist: String = "artist",
            genre: String = "genre",
            album: String = "album",
            isrc: String = "isrc",
            producer: Producer = "producer",
            url: String = "url",
            cattax: CategoryTaxonomy = "cattax",
            cat: Vec<String> = "cat",
            prodq: ProductionQuality = "prodq",
            context: ContentContext = "context",
            contentrating: String = "contentrating",
            userrating: String = "userrating",
            qagmediarating: MediaRating = "qagmediarating",
            keywords: String = "keywords",
            kwarray: Vec<String> = "kwarray",
            livestream: i32 = "livestream",
            sourcerelationship: i32 = "sourcerelationship",
            /// Length in seconds.
            len: i32 = "len",
            language: String = "language",
            langb: String = "langb",
            embeddable: i32 = "embeddable",
            data: Vec<Data> = "data",
            network: Network = "network",
            channel: Channel = "channel",
        }
    }
}

openrtb_object! {
    /// Producer of the content, when not the publisher (3.2.17).
    pub struct Producer {
        required {}
        optional {
            id: String = "id",
            name: String = "name",
            cattax: CategoryTaxonomy = "cattax",
            cat: Vec<String> = "cat",
            domain: String = "domain",
        }
    }
}

openrtb_object! {
    /// The network owning the channel the content is on (3.2.23).
    pub struct Network {
        required {}
        optional {
            id: String = "id",
            name: String = "name",
            domain: String = "domain",
        }
    }
}

openrtb_object! {
    /// The channel the content is on (3.2.24).
    pub struct Channel {
        required {}
        optional {
            id: String = "id",
            name: String = "name",
            domain: String = "domain",
        }
    }
}

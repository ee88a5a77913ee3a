//! What the asset proxy and its fills share: the tiers, the flights in progress, the failures
//! remembered, the origins, and the configured policy and lifetimes.

use std::collections::HashMap;
use std::sync::Arc;

use http::HeaderValue;

use crate::answer::Common;
use crate::clock::Clock;
use crate::config::Config;
use crate::disk::DiskTier;
use crate::flight::Flights;
use crate::freshness::TtlBounds;
use crate::memory::MemoryTier;
use crate::metrics::Metrics;
use crate::negative::Negative;
use crate::origin::Origin;
use crate::policy::TierRule;

/// Everything the asset route and its fills share.
#[derive(Debug)]
pub struct Assets {
    pub memory: MemoryTier,
    pub disk: Option<Arc<DiskTier>>,
    pub flights: Flights,
    pub negative: Negative,
    pub origins: HashMap<String, Arc<Origin>>,
    pub memory_rule: TierRule,
    pub disk_rule: Option<TierRule>,
    pub ttl: TtlBounds,
    pub stale_if_error_ms: u64,
    pub negative_ttl_ms: u64,
    pub max_object_bytes: u64,
    pub common: Common,
    pub clock: Arc<dyn Clock>,
}

impl Assets {
    /// Builds the tiers and origins of `config`; opens (and indexes) the disk tier.
    ///
    /// # Errors
    /// The disk tier's directory cannot be used.
    pub fn new(
        config: &Config,
        metrics: Arc<Metrics>,
        clock: Arc<dyn Clock>,
    ) -> std::io::Result<Assets> {
        let disk = match &config.disk {
            Some(d) => Some(Arc::new(DiskTier::open(
                &d.dir,
                d.max_bytes,
                &metrics.disk,
            )?)),
            None => None,
        };
        let origins = config
            .origins
            .iter()
            .map(|o| (o.name.clone(), Arc::new(Origin::new(o))))
            .collect();
        Ok(Assets {
            memory: MemoryTier::new(config.memory.max_bytes),
            disk,
            flights: Flights::default(),
            negative: Negative::default(),
            origins,
            memory_rule: config.memory_rule(),
            disk_rule: config.disk_rule(),
            ttl: config.ttl_bounds(),
            stale_if_error_ms: config.stale_if_error_s * 1_000,
            negative_ttl_ms: config.negative_ttl_s * 1_000,
            max_object_bytes: config.max_object_bytes,
            common: Common {
                cors: (!config.cors_allow_origin.is_empty())
                    .then(|| HeaderValue::from_str(&config.cors_allow_origin).ok())
                    .flatten(),
                metrics,
            },
            clock,
        })
    }
}

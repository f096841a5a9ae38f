//! The network's books, against the store and the host: no allocation
//! without an owner, no owner without its allocation, nothing made twice,
//! nothing left behind once healed.

use super::Checker;
use crate::model::Containerd;
use holdfast_core::{ContainerId, Core};
use std::collections::BTreeMap;

impl Checker {
    /// The network's books, after every step, against the store (what a
    /// restarted holdfastd would know), so they hold while it is down too.
    /// No allocation without an owner: every attachment on the host has a
    /// record that says it may exist. No owner without its allocation: every
    /// task of a container on a bridge network has its attachment. And no
    /// attachment is made twice.
    pub fn network(
        &self,
        _core: Option<&Core>,
        cd: &Containerd,
        net: &crate::model::HostNetwork,
        records: &BTreeMap<ContainerId, holdfast_core::Record>,
    ) -> Result<(), String> {
        if let Some(id) = net.doubled.first() {
            return Err(format!(
                "{id}: a network setup was made while its attachment existed (a leaked address)"
            ));
        }
        for id in &net.attached {
            let owned = records
                .get(id)
                .is_some_and(|r| r.network != holdfast_core::NetworkState::Detached);
            if !owned {
                return Err(format!(
                    "{id}: an attachment on the host that no record owns (leaked); record: {:?}",
                    records.get(id).map(|r| r.network)
                ));
            }
        }
        for id in cd.tasks.keys() {
            let bridged = records
                .get(id)
                .is_some_and(|r| r.config.network.needs_attachment());
            if bridged && !net.attached.contains(id) {
                return Err(format!(
                    "{id}: a task on the bridge network without its attachment"
                ));
            }
        }
        // The same books for the endpoints (`network connect`), by slot.
        if let Some((id, slot)) = net.endpoints_doubled.first() {
            return Err(format!(
                "{id}: endpoint eth{slot} was set up while it existed (a leaked address)"
            ));
        }
        for (id, slot) in &net.endpoints {
            // An `eth0` is also its own attachment's: released with it
            // when in doubt, and the container's until it is disconnected
            // from its own network (then slot 0's endpoint owns it).
            use holdfast_core::NetworkState as N;
            let owned = records.get(id).is_some_and(|r| {
                r.endpoints
                    .iter()
                    .any(|e| e.slot == *slot && e.state != N::Detached)
                    || *slot == 0
                        && (r.network == N::Attaching
                            || r.network == N::Attached && !r.own_disconnected)
            });
            if !owned {
                return Err(format!(
                    "{id}: endpoint eth{slot} on the host that no record owns (leaked); record: {:?}",
                    records.get(id).map(|r| &r.endpoints)
                ));
            }
        }
        for (id, r) in records {
            for e in &r.endpoints {
                let made = net.endpoints.contains(&(id.clone(), e.slot));
                if e.state == holdfast_core::NetworkState::Attached && !made {
                    return Err(format!(
                        "{id}: endpoint eth{} recorded attached and not on the host",
                        e.slot
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Once healed and quiet, every attachment left belongs to a task: nothing
/// stays allocated for a container that has none.
pub fn network_converged(cd: &Containerd, net: &crate::model::HostNetwork) -> Option<String> {
    let attached = net.attached.iter().find(|id| !cd.tasks.contains_key(*id));
    let endpoint = net
        .endpoints
        .iter()
        .find(|(id, _)| !cd.tasks.contains_key(id));
    attached
        .map(|id| format!("{id}: still attached with no task (an allocation left behind)"))
        .or_else(|| {
            endpoint.map(|(id, slot)| {
                format!("{id}: endpoint eth{slot} still attached with no task (left behind)")
            })
        })
}

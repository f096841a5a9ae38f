//! What each API family asks of the engine, a file per family, in the shape
//! of moby's `api/server/router/*/backend.go`: the narrow interface that
//! family's handlers need, so that a handler only parses, makes one call
//! and renders what it gets. A backend is reached through the engine's
//! handle ([`EngineHandle::containers`], [`EngineHandle::volumes`], ...).
//!
//! A backend refuses or fails with the core's [`RequestError`] kinds (what
//! was invalid, not found, in conflict, unavailable, ...; see
//! [`crate::refusal`]), so that an API maps every answer onto its statuses
//! in one place.
//!
//! [`RequestError`]: holdfast_core::RequestError

pub mod containers;
pub mod execs;
pub mod images;
pub mod networks;
pub mod system;
pub mod volumes;

use crate::engine::EngineHandle;

impl EngineHandle {
    /// `docker container ...`: what is not a command for the core alone.
    pub fn containers(&self) -> containers::Containers<'_> {
        containers::Containers::new(self)
    }

    /// `docker exec`.
    pub fn execs(&self) -> execs::Execs<'_> {
        execs::Execs::new(self)
    }

    /// `docker image ...`, `pull`, `push`, `login`, `commit`.
    pub fn images(&self) -> images::Images<'_> {
        images::Images::new(self)
    }

    /// `docker network`.
    pub fn networks(&self) -> networks::Networks<'_> {
        networks::Networks::new(self)
    }

    /// `docker info`, `version`, `events`, `system df`.
    pub fn system(&self) -> system::System<'_> {
        system::System::new(self)
    }

    /// `docker volume` and the volumes of `docker run -v`.
    pub fn volumes(&self) -> volumes::Volumes<'_> {
        volumes::Volumes::new(self)
    }
}

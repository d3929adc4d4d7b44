//! The deployment's settings as the command line changes them: the global flags (and
//! `CLAWMD_*`) over `<root>/clawmd.json` over the defaults, and a group's config handed with
//! `--config`.

use std::path::Path;

use anyhow::Context;

use clawmd::report::WarningReport;
use clawmd::settings::{Overrides, Resolved};

use crate::args::{ConfigArgs, DeliveryArgs, GlobalArgs};
use crate::printer::Printer;

impl GlobalArgs {
    /// The deployment's settings: these flags (and `CLAWMD_*`) over `<root>/clawmd.json` over
    /// the defaults. Warnings about the settings file are printed and returned. A
    /// `clawmd.json` that cannot be used stops the run before it starts
    /// ([`clawmd::Error::Settings`]; `commands::not_started` prints it).
    pub fn resolve(
        &self,
        delivery: &DeliveryArgs,
        lock_timeout: Option<u64>,
        printer: &Printer,
    ) -> Result<(Resolved, Vec<WarningReport>), clawmd::Error> {
        let (resolved, warnings) = self.resolve_quietly(delivery, lock_timeout)?;
        for warning in &warnings {
            printer.warning(&warning.message);
        }
        Ok((resolved, warnings))
    }

    /// [`GlobalArgs::resolve`] without printing the warnings (`clawmd serve` answers them in
    /// the report: its stderr is the runner's log, not a terminal).
    pub fn resolve_quietly(
        &self,
        delivery: &DeliveryArgs,
        lock_timeout: Option<u64>,
    ) -> Result<(Resolved, Vec<WarningReport>), clawmd::config::ConfigError> {
        clawmd::service::resolve_quietly(&self.root, &self.overrides(delivery, lock_timeout))
    }

    /// What these flags (and `CLAWMD_*`) say, over whatever `clawmd.json` says.
    pub fn overrides(&self, delivery: &DeliveryArgs, lock_timeout: Option<u64>) -> Overrides {
        Overrides {
            groups_dir: self.groups_dir.clone(),
            container_dir: self.container_dir.clone(),
            app_mount: self.app_mount.clone(),
            workspace_mount: self.workspace_mount.clone(),
            lock_timeout,
            delivery: delivery.delivery,
            provider: delivery.provider,
            approve_external: delivery.approve_external,
            claude_version: delivery.claude_version,
        }
    }
}

impl ConfigArgs {
    /// Puts the handed config, if any, into `layout` for `groups` (exactly one); a compose
    /// that writes keeps it where "handed" configs are read.
    pub fn apply(&self, layout: &mut clawmd::Layout, groups: &[String]) -> anyhow::Result<()> {
        let Some(from) = &self.config else {
            return Ok(());
        };
        let [group] = groups else {
            anyhow::bail!("--config hands the config of one group: name exactly one group");
        };
        let config = read_handed_config(from)?;
        clawmd::deployment::hand_config(layout, group, config)?;
        Ok(())
    }
}

/// The config handed with `--config FILE` (`-`: standard input), read no further than one
/// byte over [`clawmd::config::MAX_CONFIG_BYTES`] and refused over it
/// ([`clawmd::config::HandedConfig::new`]).
fn read_handed_config(from: &Path) -> anyhow::Result<clawmd::config::HandedConfig> {
    let most = clawmd::config::MAX_CONFIG_BYTES + 1;
    let mut bytes = Vec::new();
    if from.as_os_str() == "-" {
        std::io::Read::read_to_end(&mut std::io::Read::take(std::io::stdin(), most), &mut bytes)
            .context("cannot read the config from standard input")?;
    } else {
        let file = fs_err::File::open(from).context("cannot read --config")?;
        std::io::Read::read_to_end(&mut std::io::Read::take(file, most), &mut bytes)
            .context("cannot read --config")?;
    }
    Ok(clawmd::config::HandedConfig::new(bytes)?)
}

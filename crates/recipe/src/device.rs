//! Rules that depend on the devices a recipe trains on (`--device`): `harness validate
//! --device` applies them, and `train` / `run` refuse with the same words before any corpus,
//! tokenizer or model work.

use crate::schema::Recipe;
use harness_core::device::Device;

/// Why a recipe cannot train on a `--device` list: the key path, what is wrong, the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRefusal {
    pub key: &'static str,
    pub detail: String,
    pub fix: &'static str,
}

impl std::fmt::Display for DeviceRefusal {
    /// `DETAIL. Fix: FIX`: the words `train` prints after the key path.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}. Fix: {}", self.detail, self.fix)
    }
}

/// The first rule `recipe` breaks on `devices` (one device, or data-parallel peers):
/// bf16 on a backend without it; evaluation during training on a device list.
pub fn device_refusal(recipe: &Recipe, devices: &[Device]) -> Option<DeviceRefusal> {
    if let (Some(&device), true) = (devices.first(), recipe.precision().is_bf16()) {
        let why = match device {
            Device::Cpu => {
                Some("the CPU backend (burn-ndarray) trains through f32 kernels of its own")
            }
            Device::Wgpu => Some("wgpu compiles to WGSL, which has no bfloat16"),
            Device::Cuda(_) | Device::Flex => None,
        };
        if let Some(why) = why {
            return Some(DeviceRefusal {
                key: "train.precision",
                detail: format!("`bf16` cannot train on `--device {device}`: {why}"),
                fix: "train on `cuda:N` (a build with `--features cuda`), or on `flex` (burn-flex on the CPU, `--features flex`: bfloat16 arithmetic at f32's speed or below, for measuring what bf16 costs), or set `train.precision: f32`",
            });
        }
    }
    let evaluates = recipe
        .train
        .as_ref()
        .is_some_and(|t| t.best_metric.is_some() || t.best_per_language.is_some());
    if devices.len() > 1 && evaluates {
        return Some(DeviceRefusal {
            key: "train.best_metric",
            detail:
                "data-parallel training (a `--device` list) does not evaluate during training yet"
                    .into(),
            fix: "drop `train.best_metric` / `train.best_per_language`, or train on one device",
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe(train: &str) -> Recipe {
        serde_yaml::from_str(&format!("name: t\ntrain: {train}\n")).unwrap()
    }

    #[test]
    fn bf16_is_refused_on_cpu_and_wgpu_only() {
        let r = recipe("{precision: bf16}");
        for d in [Device::Cpu, Device::Wgpu] {
            let refusal = device_refusal(&r, &[d]).expect("refused");
            assert_eq!(refusal.key, "train.precision");
            assert!(
                refusal.detail.contains(&format!("--device {d}")),
                "{refusal}"
            );
        }
        assert_eq!(device_refusal(&r, &[Device::Cuda(0)]), None);
        assert_eq!(device_refusal(&r, &[Device::Flex]), None);
        assert_eq!(
            device_refusal(&recipe("{precision: f32}"), &[Device::Cpu]),
            None
        );
    }

    #[test]
    fn evaluation_during_training_is_refused_on_a_device_list_only() {
        let r = recipe("{best_metric: tatoeba}");
        let refusal = device_refusal(&r, &[Device::Cpu, Device::Cpu]).expect("refused");
        assert_eq!(refusal.key, "train.best_metric");
        assert_eq!(device_refusal(&r, &[Device::Cpu]), None);
    }
}

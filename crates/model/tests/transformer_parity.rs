//! harness's `transformer` encoder against PyTorch's `nn.TransformerEncoder(norm_first=True)`:
//! `tests/fixtures/transformer_parity.safetensors`, written by
//! `scripts/make_transformer_fixture.py` (its doc lists the tensors), holds a tiny model's
//! weights under PyTorch's names, a padded batch, PyTorch's token states and sentence vectors,
//! and the gradients of `sum(sentence · w)`. The weights load through burn-store's PyTorch
//! adapter (Linear weights transposed, LayerNorm `weight`/`bias` → `gamma`/`beta`) with one
//! renaming, `in_proj_weight` → `in_proj.weight`: the fused QKV keeps PyTorch's layout.

use burn::backend::{Autodiff, NdArray};
use burn::store::{ModuleSnapshot, PyTorchToBurnAdapter, SafetensorsStore};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use harness_model::encoder::transformer::{TransformerEncoder, TransformerEncoderConfig};
use harness_model::input::Padded;
use safetensors::{Dtype, SafeTensors};

type B = NdArray<f32>;
type Ad = Autodiff<B>;

fn fixture() -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/transformer_parity.safetensors");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A float32 tensor of the fixture, flat, with its shape.
fn floats(st: &SafeTensors, name: &str) -> (Vec<f32>, Vec<usize>) {
    let t = st.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(t.dtype(), Dtype::F32, "{name}");
    let v = t
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    (v, t.shape().to_vec())
}

fn config() -> TransformerEncoderConfig {
    TransformerEncoderConfig {
        n_vocab: 23,
        d_embed: 12,
        d_model: 16,
        d_ff: 32,
        heads: 2,
        layers: 2,
        pool: harness_recipe::schema::Pool::Mean,
        dropout: 0.0,
        max_len: 64,
        ngram_buckets: None,
    }
}

/// The encoder with the fixture's weights; every parameter must come from the file.
fn load<Be: Backend>(bytes: &[u8], device: &Be::Device) -> TransformerEncoder<Be> {
    let mut enc = config().init::<Be>(device);
    let mut store = SafetensorsStore::from_bytes(Some(bytes.to_vec()))
        .with_from_adapter(PyTorchToBurnAdapter)
        .with_key_remapping(r"in_proj_(weight|bias)$", "in_proj.$1")
        .allow_partial(false);
    let result = enc
        .load_from(&mut store)
        .expect("the fixture's weights load");
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert!(result.missing.is_empty(), "{:?}", result.missing);
    // burn-store lists the LayerNorm tensors it found under their PyTorch names as unused
    // too; the count of applied tensors below is what shows every parameter was loaded.
    let not_weights = ["input.", "expected.", "grad.", "loss."];
    let is_norm = |k: &str| {
        let (module, param) = k.rsplit_once('.').unwrap_or((k, ""));
        module
            .rsplit('.')
            .next()
            .is_some_and(|m| m.starts_with("norm"))
            && (param == "weight" || param == "bias")
    };
    assert!(
        result
            .unused
            .iter()
            .all(|k| not_weights.iter().any(|p| k.starts_with(p)) || is_norm(k)),
        "weights left unused: {:?}",
        result.unused
    );
    // The embedding, the projection's weight and bias, 12 tensors per layer, the final norm.
    assert_eq!(
        result.applied.len(),
        1 + 2 + 2 * 12 + 2,
        "{:?}",
        result.applied
    );
    enc
}

fn input<Be: Backend>(st: &SafeTensors, device: &Be::Device) -> Padded<Be> {
    let t = st.tensor("input.ids").unwrap();
    assert_eq!(t.dtype(), Dtype::I64);
    let ids: Vec<i64> = t
        .data()
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let shape = [t.shape()[0], t.shape()[1]];
    let (mask, _) = floats(st, "input.mask");
    Padded {
        ids: Tensor::<Be, 2, Int>::from_data(TensorData::new(ids, shape), device),
        tokens: mask.iter().filter(|&&m| m > 0.0).count(),
        mask: Tensor::from_data(TensorData::new(mask, shape), device),
        ngrams: None,
    }
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn max_abs(a: &[f32]) -> f32 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}

#[test]
fn forward_matches_pytorch() {
    let bytes = fixture();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let dev = Default::default();
    let enc = load::<B>(&bytes, &dev);
    let out = enc.forward(&input::<B>(&st, &dev), None);
    for (name, got) in [
        ("expected.states", out.states),
        ("expected.sentence", out.sentence.unsqueeze::<3>()),
    ] {
        let (want, shape) = floats(&st, name);
        let dims = got.dims();
        let got = got.into_data().to_vec::<f32>().unwrap();
        assert_eq!(
            got.len(),
            shape.iter().product::<usize>(),
            "{name}: {dims:?}"
        );
        // Numbers that mean something: not a batch of zeros.
        assert!(max_abs(&want) > 0.5, "{name}");
        let diff = max_abs_diff(&got, &want);
        eprintln!("{name}: max abs difference {diff:.3e}");
        assert!(diff <= 1e-5, "{name}: max abs difference {diff}");
    }
}

#[test]
fn gradients_match_pytorch() {
    let bytes = fixture();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let dev = Default::default();
    let enc = load::<Ad>(&bytes, &dev);
    let (w, _) = floats(&st, "loss.weight");
    let w = Tensor::<Ad, 1>::from_data(TensorData::new(w, [16]), &dev);
    let sentence = enc.forward(&input::<Ad>(&st, &dev), None).sentence;
    let grads = (sentence * w.unsqueeze::<2>()).sum().backward();
    let flat = |t: Tensor<B, 2>| t.into_data().to_vec::<f32>().unwrap();
    // Burn's Linear weights are [d_in, d_out], PyTorch's [d_out, d_in]: transposed to compare.
    let got = [
        (
            "grad.embedding.weight",
            flat(enc.embedding.weight.grad(&grads).unwrap()),
        ),
        (
            "grad.layers.0.self_attn.in_proj_weight",
            flat(
                enc.layers[0]
                    .self_attn
                    .in_proj
                    .weight
                    .grad(&grads)
                    .unwrap()
                    .transpose(),
            ),
        ),
        (
            "grad.layers.1.linear1.weight",
            flat(
                enc.layers[1]
                    .linear1
                    .weight
                    .grad(&grads)
                    .unwrap()
                    .transpose(),
            ),
        ),
        (
            "grad.norm.weight",
            flat(enc.norm.gamma.grad(&grads).unwrap().unsqueeze()),
        ),
    ];
    for (name, got) in got {
        let (want, _) = floats(&st, name);
        let scale = max_abs(&want);
        assert!(scale > 1e-3, "{name}: a zero gradient checks nothing");
        let rel = max_abs_diff(&got, &want) / scale;
        eprintln!("{name}: max abs difference / max |grad| {rel:.3e}");
        assert!(rel <= 1e-4, "{name}: relative difference {rel}");
    }
}

/// The fixture is read as it was written: perturbing one weight moves the output beyond the
/// tolerance (the comparison above can fail).
#[test]
fn a_perturbed_weight_is_noticed() {
    let bytes = fixture();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let dev = Default::default();
    let mut enc = load::<B>(&bytes, &dev);
    // The first layer's queries, keys and values scaled by 1.001 (a shift common to every
    // output unit would not do: the final LayerNorm removes it).
    let w = enc.layers[0].self_attn.in_proj.weight.val();
    enc.layers[0].self_attn.in_proj.weight = burn::module::Param::from_tensor(w * 1.001);
    let got = enc
        .forward(&input::<B>(&st, &dev), None)
        .sentence
        .into_data()
        .to_vec::<f32>()
        .unwrap();
    let (want, _) = floats(&st, "expected.sentence");
    let diff = max_abs_diff(&got, &want);
    assert!(diff > 1e-5, "{diff}");
}

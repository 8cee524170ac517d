//! burn's `OptimizerAdaptor` (`burn-optim` 0.21, `optim/simple/adaptor.rs`: a
//! `SimpleOptimizer` stepped once per parameter, its state kept per `ParamId`), with one
//! difference on a GPU: the parameters are updated grouped by shape (the groups in the order
//! their first parameter comes in the module, the module's order within a group) instead of
//! in the module's order.
//!
//! Why: on a GPU burn's fusion gives the element-wise operations of an update one kernel,
//! and joins the updates of *consecutive* same-shaped parameters into one kernel (as many as
//! its 64 operations per kernel and the device's bindings allow: four or five Adam updates);
//! in the module's order a transformer layer's shapes alternate (weight, bias, weight, …) and
//! each parameter's update was a launch of its own (issue 59). The parameters are taken out
//! of the module for their updates and put back (each tensor held once, so that an update can
//! write in place). Each update is the same arithmetic on the same operands either way, so the
//! weights and the moments are the same bits; the state record is the adaptor's own type
//! (checkpoints written by either load in the other). Left out: the adaptor's per-tensor
//! gradient clipping (harness clips by the global norm before the step,
//! `optim::clip_global_norm`).
//!
//! On the CPU, which has no fusion to gain from the order, each update runs where the adaptor
//! runs it, inside one pass over the module.

use burn::module::{AutodiffModule, ModuleMapper, Param, ParamId, ParamMapper};
use burn::optim::adaptor::GradAdaptor;
use burn::optim::record::AdaptorRecord;
use burn::optim::{GradientsParams, MultiGradientsParams, Optimizer, SimpleOptimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use std::any::Any;
use std::collections::HashMap;
use std::marker::PhantomData;

/// The per-parameter state, as burn's adaptor keeps it (its record type, which does not
/// depend on the module's).
type Records<O, M, B> =
    <burn::optim::adaptor::OptimizerAdaptor<O, M, B> as Optimizer<M, B>>::Record;

/// An optimizer over a module's parameters: `optim` stepped once per parameter with a
/// gradient, grouped by shape on a GPU (see the module's documentation).
#[derive(Clone)]
pub struct ShapeOrdered<O, M, B>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: SimpleOptimizer<B::InnerBackend>,
{
    optim: O,
    records: Records<O, M, B>,
    /// Updates grouped by shape (on a GPU) or in the module's order.
    grouped: bool,
    module: PhantomData<fn() -> M>,
}

impl<O, M, B> ShapeOrdered<O, M, B>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: SimpleOptimizer<B::InnerBackend>,
{
    /// The optimizer with no state yet.
    pub fn new(optim: O) -> Self {
        ShapeOrdered {
            optim,
            records: Default::default(),
            grouped: harness_model::gpu::on_device::<B>(),
            module: PhantomData,
        }
    }

    /// One update of every parameter that has a gradient in `grads`.
    fn step_any(&mut self, lr: f64, module: M, mut grads: GradAdaptor) -> M {
        if !self.grouped {
            let mut inline = Inline::<O, M, B> {
                optim: &self.optim,
                records: &mut self.records,
                grads: &mut grads,
                lr,
            };
            return module.map(&mut inline);
        }
        // The tensors are taken out of the module (each held once, so that an update can
        // write in place), updated group by group, then put back.
        let mut take = Take::<O, M, B> {
            grads: &mut grads,
            groups: Vec::new(),
        };
        let module = module.map(&mut take);
        let mut updated = HashMap::new();
        for (_, jobs) in take.groups {
            for job in jobs {
                let (id, tensor) = job(&self.optim, &mut self.records, lr);
                updated.insert(id, tensor);
            }
        }
        module.map(&mut PutBack::<B> {
            updated,
            _b: PhantomData,
        })
    }

    /// [`Self::new`] grouping by shape on any backend (for the tests, on the CPU).
    #[cfg(test)]
    fn grouped(optim: O) -> Self {
        ShapeOrdered {
            grouped: true,
            ..Self::new(optim)
        }
    }
}

impl<O, M, B> Optimizer<M, B> for ShapeOrdered<O, M, B>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: SimpleOptimizer<B::InnerBackend>,
{
    type Record = Records<O, M, B>;

    fn step(&mut self, lr: f64, module: M, grads: GradientsParams) -> M {
        self.step_any(lr, module, grads.into())
    }

    fn step_multi(&mut self, lr: f64, module: M, grads: MultiGradientsParams) -> M {
        self.step_any(lr, module, grads.into())
    }

    fn to_record(&self) -> Self::Record {
        self.records.clone()
    }

    fn load_record(mut self, record: Self::Record) -> Self {
        self.records = record;
        self
    }
}

/// One parameter's update, `optim.step` on its tensor and gradient with its state.
fn update<O, M, B, const D: usize>(
    optim: &O,
    records: &mut Records<O, M, B>,
    lr: f64,
    id: ParamId,
    tensor: Tensor<B, D>,
    (grad, device): (Tensor<B::InnerBackend, D>, B::Device),
) -> Tensor<B, D>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: SimpleOptimizer<B::InnerBackend>,
{
    let require_grad = tensor.is_require_grad();
    let (key, record) = records.remove_entry(&id).unzip();
    let tensor = if tensor.device() != device {
        tensor.to_device(&device)
    } else {
        tensor
    };
    let state = record.map(|r| O::to_device(r.into_state(), &device));
    let (tensor, state) = optim.step(lr, tensor.inner(), grad, state);
    if let Some(state) = state {
        records.insert(key.unwrap_or(id), AdaptorRecord::from_state(state));
    }
    let tensor = Tensor::from_inner(tensor);
    if require_grad {
        tensor.require_grad()
    } else {
        tensor
    }
}

/// The adaptor's own pass: each parameter updated as the module is mapped.
struct Inline<'a, O, M, B>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: SimpleOptimizer<B::InnerBackend>,
{
    optim: &'a O,
    records: &'a mut Records<O, M, B>,
    grads: &'a mut GradAdaptor,
    lr: f64,
}

impl<O, M, B> ModuleMapper<B> for Inline<'_, O, M, B>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: SimpleOptimizer<B::InnerBackend>,
{
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        let tensor = match self.grads.remove::<B::InnerBackend, D>(id) {
            Some(grad) => update::<O, M, B, D>(self.optim, self.records, self.lr, id, tensor, grad),
            None => tensor,
        };
        Param::from_mapped_value(id, tensor, mapper)
    }
}

/// A parameter's update, to run when its group's turn comes: returns the new tensor with
/// the parameter's mapper, boxed.
type Job<O, M, B> = Box<dyn FnOnce(&O, &mut Records<O, M, B>, f64) -> (ParamId, Box<dyn Any>)>;

/// The jobs of one shape (the parameters' dimensions).
type Group<O, M, B> = (Vec<usize>, Vec<Job<O, M, B>>);

/// Takes each parameter with a gradient out of the module into its shape's group, leaving a
/// placeholder that [`PutBack`] replaces.
struct Take<'a, O, M, B>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: SimpleOptimizer<B::InnerBackend>,
{
    grads: &'a mut GradAdaptor,
    /// Per shape, in the order first seen.
    groups: Vec<Group<O, M, B>>,
}

impl<O, M, B> ModuleMapper<B> for Take<'_, O, M, B>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: SimpleOptimizer<B::InnerBackend>,
{
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let Some(grad) = self.grads.remove::<B::InnerBackend, D>(param.id) else {
            return param;
        };
        let (id, tensor, mapper) = param.consume();
        let (shape, device) = (tensor.shape(), tensor.device());
        let require_grad = tensor.is_require_grad();
        let dims = tensor.dims().to_vec();
        let job: Job<O, M, B> = Box::new(move |optim, records, lr| {
            let tensor = update::<O, M, B, D>(optim, records, lr, id, tensor, grad);
            (id, Box::new((tensor, mapper)))
        });
        match self.groups.iter_mut().find(|(s, _)| *s == dims) {
            Some((_, jobs)) => jobs.push(job),
            None => self.groups.push((dims, vec![job])),
        }
        Param::uninitialized(
            id,
            |_, _| unreachable!("a parameter taken out for its update is put back before use"),
            device,
            require_grad,
            shape,
        )
    }
}

/// Puts each updated tensor in its placeholder's place, with the parameter's own mapper.
struct PutBack<B> {
    updated: HashMap<ParamId, Box<dyn Any>>,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend> ModuleMapper<B> for PutBack<B> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let Some(new) = self.updated.remove(&param.id) else {
            return param;
        };
        let (tensor, mapper) = *new
            .downcast::<(Tensor<B, D>, ParamMapper<Tensor<B, D>>)>()
            .unwrap_or_else(|_| unreachable!("a parameter keeps its rank"));
        Param::from_mapped_value(param.id, tensor, mapper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, NdArray};
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::{Adam, AdamConfig};
    use burn::tensor::backend::Backend;
    use burn::tensor::TensorData;
    use std::sync::{Arc, Mutex};

    type B = Autodiff<NdArray<f32>>;
    type Net = Vec<Linear<B>>;

    /// burn's Adam, noting the shape of each tensor it is stepped with.
    #[derive(Clone)]
    struct Logged {
        adam: Adam,
        shapes: Arc<Mutex<Vec<Vec<usize>>>>,
    }

    impl<IB: Backend> SimpleOptimizer<IB> for Logged {
        type State<const D: usize> = <Adam as SimpleOptimizer<IB>>::State<D>;

        fn step<const D: usize>(
            &self,
            lr: f64,
            tensor: Tensor<IB, D>,
            grad: Tensor<IB, D>,
            state: Option<Self::State<D>>,
        ) -> (Tensor<IB, D>, Option<Self::State<D>>) {
            self.shapes.lock().unwrap().push(tensor.dims().to_vec());
            self.adam.step(lr, tensor, grad, state)
        }

        fn to_device<const D: usize>(state: Self::State<D>, device: &IB::Device) -> Self::State<D> {
            <Adam as SimpleOptimizer<IB>>::to_device(state, device)
        }
    }

    /// Three layers whose parameters' shapes alternate in the module's order.
    fn net() -> Net {
        let dev = Default::default();
        let net: Net = [(3, 2), (2, 2), (3, 2)]
            .map(|(i, o)| LinearConfig::new(i, o).init(&dev))
            .into();
        // Read once, so that clones share these values (an unread parameter is initialized
        // lazily, each clone on its own).
        values(&net);
        net
    }

    fn grads_of(net: &Net) -> GradientsParams {
        let x = Tensor::<B, 2>::from_data(
            TensorData::new(vec![3f32, -4., 0.5, 1., 2., -7.], [2, 3]),
            &Default::default(),
        );
        let hidden = net[1].forward(net[0].forward(x.clone()));
        let loss = (hidden * net[2].forward(x)).sum() * 10.0;
        GradientsParams::from_grads(loss.backward(), net)
    }

    fn values(net: &Net) -> Vec<Vec<f32>> {
        net.iter()
            .flat_map(|l| {
                [
                    l.weight.val().into_data(),
                    l.bias.as_ref().unwrap().val().into_data(),
                ]
            })
            .map(|d| d.to_vec::<f32>().unwrap())
            .collect()
    }

    fn logged() -> (Logged, Arc<Mutex<Vec<Vec<usize>>>>) {
        let shapes = Arc::new(Mutex::new(Vec::new()));
        let adam = AdamConfig::new().with_epsilon(1e-8).build();
        (
            Logged {
                adam,
                shapes: shapes.clone(),
            },
            shapes,
        )
    }

    /// Grouped by shape, the updates run in the groups' order and give burn's adaptor's
    /// weights and state bit for bit, over two steps (the second from the first's moments);
    /// the state of either loads into the other.
    #[test]
    fn grouped_updates_are_the_adaptors_in_another_order() {
        let start = net();
        let (log, shapes) = logged();
        let mut burns = burn::optim::adaptor::OptimizerAdaptor::<Logged, Net, B>::from(log.clone());
        let mut ours = ShapeOrdered::<Logged, Net, B>::grouped(log);
        let (mut a, mut b) = (start.clone(), start.clone());
        for _ in 0..2 {
            a = burns.step(1e-2, a.clone(), grads_of(&a));
            b = ours.step(1e-2, b.clone(), grads_of(&b));
        }
        assert_eq!(values(&a), values(&b));
        assert_ne!(values(&a), values(&start), "no update");
        let seen = shapes.lock().unwrap().clone();
        // Step one: burn's six updates, then ours.
        let (module_order, grouped) = (&seen[..6], &seen[6..12]);
        let (w3, w2, bias) = (vec![3, 2], vec![2, 2], vec![2]);
        let step = [
            w3.clone(),
            bias.clone(),
            w2.clone(),
            bias.clone(),
            w3.clone(),
            bias.clone(),
        ];
        assert_eq!(
            module_order[..6],
            step,
            "burn's adaptor: the module's order"
        );
        let step = [w3.clone(), w3, bias.clone(), bias.clone(), bias, w2];
        assert_eq!(
            grouped[..6],
            step,
            "grouped by shape, the groups in first-seen order"
        );

        // The same record type, the same moments: each continues from the other's state.
        let (mut a2, mut b2) = (a.clone(), a.clone());
        let mut ours_from_burns =
            ShapeOrdered::<Logged, Net, B>::grouped(logged().0).load_record(burns.to_record());
        let mut burns_from_ours =
            burn::optim::adaptor::OptimizerAdaptor::<Logged, Net, B>::from(logged().0)
                .load_record(ours.to_record());
        a2 = burns_from_ours.step(1e-2, a2.clone(), grads_of(&a2));
        b2 = ours_from_burns.step(1e-2, b2.clone(), grads_of(&b2));
        assert_eq!(values(&a2), values(&b2));
    }

    /// Grouped, a parameter without a gradient keeps its value (and one with a gradient
    /// changes): only the taken-out parameters are put back.
    #[test]
    fn grouped_leaves_parameters_without_gradients_alone() {
        let start = net();
        let x = Tensor::<B, 2>::from_data(
            TensorData::new(vec![3f32, -4., 0.5], [1, 3]),
            &Default::default(),
        );
        let grads = GradientsParams::from_grads(start[0].forward(x).sum().backward(), &start);
        let mut ours = ShapeOrdered::<Logged, Net, B>::grouped(logged().0);
        let after = ours.step(1e-2, start.clone(), grads);
        let (before, after) = (values(&start), values(&after));
        assert_ne!(before[..2], after[..2], "the first layer has gradients");
        assert_eq!(before[2..], after[2..], "the others have none");
    }

    /// On the CPU the updates run in the module's order, in one pass.
    #[test]
    fn on_the_cpu_updates_run_in_the_modules_order() {
        let (log, shapes) = logged();
        let mut ours = ShapeOrdered::<Logged, Net, B>::new(log);
        let n = net();
        let _ = ours.step(1e-2, n.clone(), grads_of(&n));
        let seen = shapes.lock().unwrap().clone();
        assert_eq!(seen[1], vec![2], "a bias after the first weight: {seen:?}");
        assert_eq!(seen.len(), 6);
    }
}

"""Unit ablation (core/ablation): the tail after a layer equals a full forward with the channels replaced, on the
trained demo model and on a torchvision ResNet-18 with random weights; per class numbers equal the slow reference's
(tests/oracles/ablation_reference.py); the fallback to full forwards when the tail cannot be separated; a planted
case on the demo world (the units that detect houses carry the village scene); groups, ranking and files."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from oracles.ablation_reference import ablated_logits, per_class
from probescope.core.ablation.ablate import LayerAblation
from probescope.core.ablation.groups import (
    UnitGroup,
    asserted_atoms,
    concept_units,
    each_unit,
    format_units,
    hand_picked,
    specialised_units,
    top_units,
)
from probescope.core.ablation.results import AblationResult
from probescope.core.ablation.tail import NotSeparable, describe, split_tail
from probescope.core.data.activations import extract_activations
from probescope.core.data.broden import BrodenDataset
from probescope.core.data.preprocess import IMAGENET
from probescope.core.demo.dataset import write_demo_dataset
from probescope.core.demo.world import SCENES
from probescope.core.dissection.correlation import scene_truth
from probescope.core.dissection.engine import dissect
from probescope.core.dissection.formula import parse_formula
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.results import DissectionResult, Explanation, UnitResult
from probescope.core.errors import InputError
from probescope.core.models.loading import load_model
from probescope.core.tasks import Cancelled


def _world(root, model, layer, n_images):
    data = write_demo_dataset(root / "data", n_images=n_images)
    ds = BrodenDataset.open(data)
    act = extract_activations(model, layer, ds, None)
    images = model.preprocess([ds.load_image(i) for i in range(ds.n_images)])
    return SimpleNamespace(model=model, layer=layer, ds=ds, act=act, images=images,
                           truth=scene_truth(ds, model.class_names))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The trained demo model's layer4 on 140 demo images (10 per scene)."""
    torch.manual_seed(0)
    return _world(tmp_path_factory.mktemp("demo"), load_model("demo"), "layer4", 140)


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    """A torchvision ResNet-18 with random weights (14 outputs named after the demo scenes) on 14 demo images, fed
    at 64x64."""
    from torchvision.models import resnet18  # (here: its import costs every xdist worker seconds at collection)

    root = tmp_path_factory.mktemp("resnet")
    torch.manual_seed(0)
    torch.save(resnet18(num_classes=len(SCENES)).state_dict(), root / "r18.pth")
    model = load_model(f"resnet18:{root / 'r18.pth'}", class_names=list(SCENES),
                       preprocess=IMAGENET.with_resize("stretch", 64))  # layer4 on a 2x2 grid: fast forwards
    return _world(root, model, "layer4", 14)


def _zeroed(act, units):
    x = torch.from_numpy(np.array(act, dtype=np.float32))
    x[:, list(units)] = 0.0
    return x


@pytest.mark.parametrize("world", ["demo", "resnet"])
def test_tail_equals_full_forward_with_channels_zeroed(world, request):
    w = request.getfixturevalue(world)
    tail = split_tail(w.model.module, w.layer)
    assert describe(tail) == "avgpool → flatten → fc"
    x = w.images[:6]
    for units in ([], [3], [0, 5, 17, 100], list(range(0, w.act.shape[1], 2))):
        with torch.no_grad():
            fast = tail(_zeroed(w.act[:6], units))
        full = ablated_logits(w.model.module, w.layer, x, units)
        torch.testing.assert_close(fast, full, rtol=1e-4, atol=1e-4)


def _first(truth, n):
    """The true classes with only the first n images labelled (the reference runs on those)."""
    return np.where(np.arange(len(truth)) < n, truth, -1)


@pytest.mark.parametrize("world", ["demo", "resnet"])
def test_per_class_numbers_match_the_reference(world, request):
    w = request.getfixturevalue(world)
    groups = [hand_picked([7]), hand_picked([1, 2, 30, 64]), hand_picked(range(0, 128))]
    truth = _first(w.truth, 28)
    result = LayerAblation(w.model, w.layer, w.act, w.ds, truth, w.model.class_names, batch_size=8).run(groups)
    assert result.path == "tail" and result.path_note == "avgpool → flatten → fc"
    before = per_class(w.model.module, w.layer, w.images[:28], truth, [])
    assert [result.class_index[r] for r in range(len(result.classes))] == sorted(before)
    np.testing.assert_allclose(result.accuracy_before, [before[c][0] for c in sorted(before)])
    np.testing.assert_allclose(result.p_true_before, [before[c][1] for c in sorted(before)], atol=1e-5)
    for g, group in enumerate(groups):
        after = per_class(w.model.module, w.layer, w.images[:28], truth, group.units)
        np.testing.assert_allclose(result.accuracy_after[g], [after[c][0] for c in sorted(after)])
        np.testing.assert_allclose(result.p_true_after[g], [after[c][1] for c in sorted(after)], atol=1e-5)


def test_mean_ablation_and_the_hook_path_agree_with_the_reference(demo):
    groups = [hand_picked([5, 9]), hand_picked([40])]
    truth = _first(demo.truth, 28)
    tail = LayerAblation(demo.model, "layer4", demo.act, demo.ds, truth, SCENES, mode="mean").run(groups)
    hook = LayerAblation(demo.model, "layer4", demo.act, demo.ds, truth, SCENES, mode="mean",
                         path="hook").run(groups)
    assert (tail.path, hook.path) == ("tail", "hook") and "asked for" in hook.path_note
    mean = np.asarray(demo.act, np.float64).mean(axis=(0, 2, 3))  # over every image and position of the dataset
    for g, group in enumerate(groups):
        ref = per_class(demo.model.module, "layer4", demo.images[:28], truth, group.units, mean[list(group.units)])
        for result in (tail, hook):
            np.testing.assert_allclose(result.accuracy_after[g], [ref[c][0] for c in sorted(ref)])
            np.testing.assert_allclose(result.p_true_after[g], [ref[c][1] for c in sorted(ref)], atol=1e-5)


def test_a_layer_called_twice_is_ablated_in_its_last_call(resnet):
    """BasicBlock runs its relu twice; extraction keeps the last call, and so do the tail and the hook path."""
    layer = "layer4.1.relu"
    act = extract_activations(resnet.model, layer, resnet.ds, None)
    x = resnet.images[:4]
    with torch.no_grad():
        fast = split_tail(resnet.model.module, layer)(_zeroed(act[:4], [2, 8]))
    torch.testing.assert_close(fast, ablated_logits(resnet.model.module, layer, x, [2, 8]), rtol=1e-4, atol=1e-4)
    groups = [hand_picked([2, 8])]
    tail = LayerAblation(resnet.model, layer, act, resnet.ds, resnet.truth, SCENES).run(groups)
    hook = LayerAblation(resnet.model, layer, act, resnet.ds, resnet.truth, SCENES, path="hook").run(groups)
    np.testing.assert_allclose(tail.p_true_after, hook.p_true_after, atol=1e-5)


def test_no_tail_around_a_skip_connection_falls_back_to_full_forwards(resnet):
    layer = "layer4.0.conv1"  # the block adds its input back after this conv: the tail needs more than its output
    with pytest.raises(NotSeparable, match="connection around"):
        split_tail(resnet.model.module, layer)
    act = extract_activations(resnet.model, layer, resnet.ds, None)
    ablation = LayerAblation(resnet.model, layer, act, resnet.ds, resnet.truth, SCENES)
    assert ablation.path == "hook" and "connection around" in ablation.path_note
    result = ablation.run([hand_picked([4, 60])])
    ref = per_class(resnet.model.module, layer, resnet.images, resnet.truth, [4, 60])
    np.testing.assert_allclose(result.p_true_after[0], [ref[c][1] for c in sorted(ref)], atol=1e-5)
    with pytest.raises(InputError, match="no tail after 'layer4.0.conv1'"):
        LayerAblation(resnet.model, layer, act, resnet.ds, resnet.truth, SCENES, path="tail")


def test_planted_removing_the_house_units_hurts_the_village_most(demo):
    """The village scene is houses on grass: ablating every unit whose explanation names `house` lowers the village's
    accuracy more than any other class's (street scenes have houses too, beside roads and cars)."""
    dissection = dissect(LabelStore.build(demo.ds), demo.act)
    group = concept_units(dissection, "house")
    assert len(group.units) >= 10
    result = LayerAblation(demo.model, "layer4", demo.act, demo.ds, demo.truth, SCENES).run([group])
    delta = dict(zip(result.classes, result.delta_accuracy[0]))
    worst = min(delta, key=delta.get)
    assert worst == "village-s"
    assert delta["village-s"] <= -0.3
    assert all(d > delta["village-s"] for c, d in delta.items() if c != "village-s")
    assert result.most_hurt(0, 1)[0].name == "village-s"


def test_each_unit_cancel_and_progress(demo):
    ablation = LayerAblation(demo.model, "layer4", demo.act, demo.ds, demo.truth, SCENES, batch_size=50)
    seen = []
    result = ablation.run(each_unit(range(128)), progress=lambda f, m: seen.append(f))
    assert result.correct_after.shape == (128, 14) and seen[-1] == 1.0 and seen == sorted(seen)
    assert result.group_of_unit(17) == 17 and result.groups[17] == UnitGroup("unit 17", (17,))
    again = ablation.run([hand_picked([17])])  # the unablated pass is measured once per LayerAblation
    np.testing.assert_array_equal(again.correct_after[0], result.correct_after[17])
    np.testing.assert_allclose(again.p_true_after[0], result.p_true_after[17], atol=1e-6)
    with pytest.raises(Cancelled):
        ablation.run(each_unit(range(128)), cancel=lambda: True)


def test_bad_inputs_are_one_line_errors(demo):
    args = (demo.model, "layer4", demo.act, demo.ds)
    with pytest.raises(InputError, match="mode 'half'"):
        LayerAblation(*args, demo.truth, SCENES, mode="half")
    with pytest.raises(InputError, match="no image's scene label"):
        LayerAblation(*args, np.full(len(demo.truth), -1), SCENES)
    with pytest.raises(InputError, match="14 outputs but 3 class names"):
        LayerAblation(*args, np.minimum(demo.truth, 2), SCENES[:3])
    with pytest.raises(InputError, match="are not layer 'layer4'"):
        LayerAblation(demo.model, "layer4", np.asarray(demo.act) + 5.0, demo.ds, demo.truth, SCENES)
    with pytest.raises(InputError, match="shape"):
        LayerAblation(demo.model, "layer4", np.asarray(demo.act)[:, :64], demo.ds, demo.truth, SCENES)
    ablation = LayerAblation(*args, demo.truth, SCENES)
    with pytest.raises(InputError, match="unit 128 out of range"):
        ablation.run([hand_picked([3, 128])])


# ---- groups, ranking, files -----------------------------------------------------------------------------------

def _explanation(text, names, iou=0.1):
    return Explanation(parse_formula(text, {v: k for k, v in names.items()}), text, iou, 0.5)


def _dissection():
    names = {1: "snow", 2: "tree", 3: "sky", 4: "snowy_forest-s"}
    labels = {1: ("snow", "object"), 2: ("tree", "object"), 3: ("sky", "object"), 4: ("snowy_forest-s", "scene")}

    def unit(u, nd, **searches):
        return UnitResult(u, 1.0, 10, 3, _explanation(nd, names), {m.replace("_", "-"): _explanation(t, names)
                                                                   for m, t in searches.items()}, [], [])

    units = [unit(0, "snow", iou="(snow OR sky)", da_stop="snow"),  # specialised
             unit(1, "tree", iou="(tree AND NOT snow)", da_stop="tree"),  # snow only under AND NOT
             unit(2, "sky", iou="((sky AND tree) OR snow)", da_stop="(sky AND tree)"),
             unit(3, "tree", iou="tree", da_stop="tree")]
    return DissectionResult({}, {}, {"layer": "layer4"}, labels, 4, {r.unit: r for r in units}, complete=True)


def test_concept_and_specialised_groups():
    result = _dissection()
    assert asserted_atoms(result.units[1].explanations["iou"].formula) == {2}
    assert concept_units(result, "snow") == UnitGroup("concept snow", (0, 2))
    assert concept_units(result, "tree").units == (1, 2, 3)
    assert specialised_units(result) == UnitGroup("specialised", (0, 1))
    with pytest.raises(InputError, match="no concept 'ice'"):
        concept_units(result, "ice")
    with pytest.raises(InputError, match="no unit's explanation names 'snowy_forest-s'"):
        concept_units(result, "snowy_forest-s")
    with pytest.raises(InputError, match="IoU above 0.5"):
        concept_units(result, "snow", min_iou=0.5)


def test_units_text_round_trip():
    from probescope.core.bounds import UNIT, IntRanges

    for units in ([0, 1, 2, 3, 17], [5], [1, 3, 5, 6, 7, 9, 10]):
        assert IntRanges.parse(format_units(units), "--units", UNIT).values("", "", high=99, because="") == units
    assert format_units([17, 0, 1, 2, 3, 3]) == "0-3,17"
    assert hand_picked([9, 8, 7]) == UnitGroup("units 7-9", (7, 8, 9))
    with pytest.raises(InputError):
        hand_picked([])


def _hand_worked() -> AblationResult:
    """Three classes of 10, 10 and 5 images; group 0 costs class a 3 images and class c 1, group 1 only lowers b's
    probability, group 2 helps a and costs b 2 images."""
    return AblationResult(
        layer="layer4", mode="zero", path="tail", path_note="avgpool → flatten → fc", classes=["a", "b", "c"],
        class_index=[0, 2, 5], images=np.array([10, 10, 5]), correct_before=np.array([9, 10, 4]),
        p_true_before=np.array([0.8, 0.9, 0.7]), groups=each_unit([4, 7, 9]),
        correct_after=np.array([[6, 10, 3], [9, 10, 4], [10, 8, 4]]),
        p_true_after=np.array([[0.5, 0.9, 0.6], [0.8, 0.7, 0.7], [0.85, 0.6, 0.7]]),
        model={"spec": "demo"}, dataset={"root": "/x"})


def test_ranking_hand_worked():
    r = _hand_worked()
    np.testing.assert_allclose(r.delta_accuracy[0], [-0.3, 0.0, -0.2])
    assert [e.name for e in r.most_hurt(0)] == ["a", "c"]  # -0.3 before -0.2; b unchanged
    assert [e.name for e in r.most_hurt(1)] == ["b"]  # accuracy unchanged, probability -0.2
    assert [e.name for e in r.most_hurt(2)] == ["b"] and [e.name for e in r.most_helped(2)] == ["a"]
    assert [e.name for e in r.most_hurt(0, by="probability")] == ["a", "c"]
    e = r.most_hurt(0)[0]
    assert (e.images, e.accuracy_before, e.accuracy_after) == (10, 0.9, 0.6)
    assert e.delta_p_true == pytest.approx(-0.3)
    assert r.ranking(r.class_row("b"), axis="groups") == [2, 1]  # -2 images, then probability only
    assert top_units(r, "b", 1) == UnitGroup("top 1 for b", (9,))
    assert top_units(r, "b", 5).units == (9, 7)
    with pytest.raises(InputError, match="class 'z'"):
        r.class_row("z")
    with pytest.raises(InputError, match="no single unit's ablation lowers"):
        top_units(AblationResult(**{**r.__dict__, "correct_after": np.tile(r.correct_before, (3, 1)),
                                    "p_true_after": np.tile(r.p_true_before, (3, 1))}), "a", 2)


def test_files_round_trip(tmp_path):
    r = _hand_worked()
    r.save(tmp_path / "ablation.json")
    back = AblationResult.load(tmp_path / "ablation.json")
    assert back.groups == r.groups and back.classes == r.classes and back.model == r.model
    np.testing.assert_array_equal(back.correct_after, r.correct_after)
    np.testing.assert_array_equal(back.p_true_after, r.p_true_after)
    r.write_csv(tmp_path / "ablation.csv")
    lines = (tmp_path / "ablation.csv").read_text().splitlines()
    assert lines[0] == ("group,units,class,images,accuracy_before,accuracy_after,delta_accuracy,p_true_before,"
                        "p_true_after,delta_p_true")
    assert len(lines) == 1 + 3 * 3 and lines[1].startswith("unit 4,4,a,10,0.9,0.6,")
    (tmp_path / "bad.json").write_text('{"format": "probescope-ablation/1", "classes": 3}')
    with pytest.raises(InputError, match="damaged ablation file"):
        AblationResult.load(tmp_path / "bad.json")
    with pytest.raises(InputError, match="damaged ablation file"):
        AblationResult.load(tmp_path / "ablation.csv")
    (tmp_path / "other.json").write_text('{"format": "probescope-dissection/1"}')
    with pytest.raises(InputError, match="not a probescope ablation"):
        AblationResult.load(tmp_path / "other.json")


def test_scene_truth_from_the_dataset_equals_the_label_store(demo):
    np.testing.assert_array_equal(scene_truth(demo.ds, SCENES), scene_truth(LabelStore.build(demo.ds), SCENES))
    assert (demo.truth == [i % 14 for i in range(demo.ds.n_images)]).all()


def test_under_inference_mode_as_the_app_runs_it(demo):
    """The app's compute thread runs every task under torch.inference_mode, whose tensors keep no version counter:
    the numbers are the same as outside it, also when the reused buffer serves a second run."""
    groups = [hand_picked([3]), hand_picked([5, 9]), hand_picked([40])]
    truth = _first(demo.truth, 28)
    plain = LayerAblation(demo.model, "layer4", demo.act, demo.ds, truth, SCENES).run(groups)
    with torch.inference_mode():
        ablation = LayerAblation(demo.model, "layer4", demo.act, demo.ds, truth, SCENES)
        first, again = ablation.run(groups), ablation.run(groups[::-1])
    np.testing.assert_array_equal(first.p_true_after, plain.p_true_after)
    np.testing.assert_array_equal(again.p_true_after, plain.p_true_after[::-1])


def test_the_role_panels_job_keeps_one_layer_ablation_in_its_session(demo):
    """`jobs.ablation.ablate_job` (what the Role panel submits): the model named by its ModelInfo, the layer's
    LayerAblation made once per result and mode and reused, one layer at a time; the numbers are the workflow's."""
    import pickle

    from probescope.jobs.ablation import ablate, ablate_job, layer_ablation, true_classes
    from probescope.jobs.inputs import OpenRequest, hold_model
    from probescope.jobs.protocol import Job, TaskContext

    ctx = TaskContext()
    info = hold_model(ctx.session, OpenRequest("model", "demo"), "cpu", demo.model)
    groups = [hand_picked([3, 7])]

    def run(key: str) -> AblationResult:
        job = Job(ablate_job, dict(model=info, key=key, layer=demo.layer, activations=demo.act, dataset=demo.ds,
                                   store=demo.ds, mode="zero", groups=groups))
        pickle.dumps(job)  # it can travel to another process
        steps = job(ctx)
        try:
            while True:
                next(steps)
        except StopIteration as done:
            return done.value

    first = run("result A")
    (held,) = ctx.session.held("ablation")
    made = ctx.session.get("ablation", held, lambda: None)
    again = run("result A")
    assert ctx.session.get("ablation", held, lambda: None) is made  # not built again
    run("result B")
    assert ctx.session.held("ablation") == [("result B", "zero")]  # one layer at a time
    direct = ablate(layer_ablation(demo.model, demo.layer, demo.act, demo.ds,
                                   true_classes(demo.ds, demo.model.class_names), demo.model.class_names), groups)
    for result in (first, again):
        np.testing.assert_array_equal(result.delta_accuracy, direct.delta_accuracy)
        np.testing.assert_array_equal(result.delta_p_true, direct.delta_p_true)

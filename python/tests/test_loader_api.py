"""The loader drives a BrandDataset through its public API only: its pass
methods (begin_iteration, step_received, end_iteration) and state_dict. Checked two
ways: by the source of every brand.torch module but the dataset's (no
private attribute of anything but the module's own objects), and at run
time, by a dataset whose private attributes fail when the rest of the
package touches them, read by a loader with and without workers."""

import ast
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gateway import tensor_gateway  # noqa: E402

import torch  # noqa: E402  (a missing torch is an error, not a skip)

import brand.torch  # noqa: E402
from brand.torch import BrandDataset  # noqa: E402

B = 8
SEED = 5
PACKAGE = os.path.dirname(os.path.abspath(brand.torch.__file__))
DATASET_MODULE = os.path.join(PACKAGE, "_dataset.py")


def private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def dataset_privates():
    """The private members of a BrandDataset: its class's and every
    ``self._name`` its module sets or reads."""
    names = {n for n in vars(BrandDataset) if private(n)}
    with open(DATASET_MODULE, encoding="utf-8") as f:
        tree = ast.parse(f.read(), DATASET_MODULE)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                and private(node.attr)):
            names.add(node.attr)
    return names


def private_uses(path, names):
    """(line, what) of each use a module makes of a private member of the
    dataset (``names``) on anything but its own ``self``: ``ds._units``,
    ``self.dataset._board``; and of any private attribute named by a
    string (``getattr(info.dataset, "_blocks")``)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in names:
            if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                out.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and private(node.args[1].value)):
            out.append((node.lineno, ast.unparse(node)))
    return sorted(out)


class TestSource(unittest.TestCase):
    def test_no_module_reaches_into_the_dataset(self):
        names = dataset_privates()
        self.assertLessEqual({"_units", "_start_iteration", "_world"}, names)
        modules = sorted(n for n in os.listdir(PACKAGE) if n.endswith(".py"))
        self.assertIn("_loader.py", modules)
        for name in modules:
            if name == "_dataset.py":
                continue
            with self.subTest(module=name):
                self.assertEqual(private_uses(os.path.join(PACKAGE, name), names), [])

    def test_the_check_sees_a_private_use(self):
        """The check itself: the forms it must catch are caught."""
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write("def f(self, ds, info):\n    ds._units += 1\n    self.dataset._start_iteration(0)\n"
                    "    torch.UntypedStorage._new_shared(8)\n"
                    "    return getattr(info.dataset, '_blocks', None), self._units\n")
        self.addCleanup(os.unlink, f.name)
        self.assertEqual([w for _, w in private_uses(f.name, dataset_privates())],
                         ["ds._units", "self.dataset._start_iteration", "getattr(info.dataset, '_blocks', None)"])


class Guarded(BrandDataset):
    """A BrandDataset whose private attributes fail when code of the brand
    package outside the dataset's module reads or sets them (in the
    trainer's process or in a worker)."""

    @staticmethod
    def check(name):
        if not private(name):
            return
        caller = os.path.abspath(sys._getframe(2).f_code.co_filename)
        if caller.startswith(PACKAGE + os.sep) and caller != DATASET_MODULE:
            raise AssertionError(f"{os.path.basename(caller)} touched the dataset's private {name}")

    def __getattribute__(self, name):
        Guarded.check(name)
        return super().__getattribute__(name)

    def __setattr__(self, name, value):
        Guarded.check(name)
        super().__setattr__(name, value)


class TestGuarded(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = tensor_gateway()

    def test_a_loader_pass_uses_the_public_api(self):
        n = len(self.gw.datasets["img"])
        for workers in (0, 1, 2):
            with self.subTest(num_workers=workers):
                ds = Guarded(self.gw.url, dataset="img", seed=SEED, transform="crop32", batch_size=B)
                got = 0
                for step in ds.loader(num_workers=workers):
                    self.assertEqual(step["npy"].dtype, torch.uint8)
                    got += len(step["__key__"])
                self.assertEqual(got, n)
                state = ds.state_dict()
                self.assertEqual(state["position"], n)
                # Stopped after two steps: the state counts them.
                ds = Guarded(self.gw.url, dataset="img", seed=SEED, transform="crop32", batch_size=B)
                ds.set_epoch(1)
                it = iter(ds.loader(num_workers=workers))
                next(it)
                next(it)
                self.assertEqual(ds.state_dict()["position"], 2 * B)
                del it
                # Resumed there: the rest of the epoch.
                again = Guarded(self.gw.url, dataset="img", seed=SEED, transform="crop32", batch_size=B)
                again.load_state_dict(ds.state_dict())
                rest = sum(len(s["__key__"]) for s in again.loader(num_workers=workers))
                self.assertEqual(rest, n - 2 * B)
                self.assertEqual(again.state_dict()["position"], n)

    def test_worker_blocks_reach_collate_tensors(self):
        """The workers stack into the loader's shared blocks (the board
        passed to them, not set on the dataset)."""
        from brand.torch._shm import BLOCK_MAGIC, storage

        ds = Guarded(self.gw.url, dataset="img", seed=SEED, transform="crop32", batch_size=B)
        for step in ds.loader(num_workers=1):
            x = step["npy"]
            head = torch.empty(0, dtype=torch.uint8).set_(storage(x), 0, (8,), (1,)).numpy().tobytes()
            self.assertEqual(head, BLOCK_MAGIC)

    def test_the_given_worker_init_fn_still_runs(self):
        """The loader's own worker_init_fn hands out the blocks, then calls
        the one it was given, in every worker; the loader keeps that one."""
        ran = torch.zeros(2, dtype=torch.int32).share_memory_()
        init = MarkWorker(ran)
        loader = Guarded(self.gw.url, dataset="img", seed=SEED, transform="crop32", batch_size=B).loader(
            num_workers=2, worker_init_fn=init)
        steps = list(loader)
        self.assertEqual(ran.tolist(), [1, 1])
        self.assertIs(loader.worker_init_fn, init)
        self.assertEqual(sum(len(s["__key__"]) for s in steps), len(self.gw.datasets["img"]))


class MarkWorker:
    """A worker_init_fn that marks its worker in a shared tensor."""

    def __init__(self, ran):
        self.ran = ran

    def __call__(self, worker_id):
        self.ran[worker_id] += 1


class ConvertStep(unittest.TestCase):
    """A BrandLoader of gateway batches converts each step as PyTorch's
    default_convert does, leaving its JSON members as decoded (the same
    objects: nothing in decoded JSON is an array to convert)."""

    def test_as_default_convert_but_json(self):
        import numpy as np
        from torch.utils.data._utils.collate import default_convert

        from brand.torch._loader import convert_step

        meta = [{"frames": [1, 3, 5], "pts": [512, 1536, 2560], "seconds": [0.04, 0.12, 0.2]}]
        step = {"__key__": ["a/v0/seg000000"], "frames": torch.zeros(1, 3, 2, 2, 3, dtype=torch.uint8),
                "state.npy": [np.arange(4, dtype=np.float32)], "cls": np.array([7]), "json": meta,
                "x.json": meta}
        got, want = convert_step(step), default_convert(step)
        self.assertEqual(set(got), set(want))
        self.assertIs(got["json"], meta)
        self.assertIs(got["x.json"], meta)
        self.assertIs(got["frames"], step["frames"])
        self.assertIsInstance(got["cls"], torch.Tensor)
        self.assertTrue(torch.equal(got["cls"], want["cls"]))
        self.assertIsInstance(got["state.npy"][0], torch.Tensor)
        self.assertTrue(torch.equal(got["state.npy"][0], want["state.npy"][0]))
        self.assertEqual(got["__key__"], want["__key__"])
        # Anything but a dict is default_convert's.
        arr = np.arange(3)
        self.assertTrue(torch.equal(convert_step(arr), default_convert(arr)))

    def test_the_loaders_collate(self):
        from brand.torch._loader import convert_step

        ds = BrandDataset(tensor_gateway().url, dataset="img", seed=SEED, batch_size=B, batches=True)
        self.assertIs(ds.loader().collate_fn, convert_step)
        self.assertIs(ds.loader(collate_fn=list).collate_fn, list)


if __name__ == "__main__":
    unittest.main()

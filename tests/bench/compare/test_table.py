#!/usr/bin/python3
"""bench/compare/table.py on nccl-tests tables: the current layout with both placements, in-place
columns of N/A with a FAILED footer, a run killed mid-sweep with the check off, the old layout
without a root column, and bad input. The samples are described in samples/README.md."""

import json
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "bench" / "compare"))
import table  # noqa: E402

SAMPLES = HERE / "samples"


class AllReduceBothPlacements(unittest.TestCase):
    """nccl-tests' all_reduce_perf on 8 ranks, 8 B .. 128 MiB doubling, both placements."""

    @classmethod
    def setUpClass(cls):
        cls.t = table.parse_file(SAMPLES / "nccl_tests_all_reduce_8ranks.txt", strict=True)

    def test_every_size_parsed(self):
        sizes = [r.size for r in self.t.rows]
        self.assertEqual(sizes, [8 << i for i in range(25)])  # 8 B .. 128 MiB
        self.assertEqual(self.t.unparsed, [])

    def test_first_and_last_rows(self):
        first, last = self.t.rows[0], self.t.rows[-1]
        self.assertEqual((first.size, first.count, first.type, first.redop, first.root),
                         (8, 2, "float", "sum", -1))
        self.assertEqual(first.out_of_place, table.Measurement(28.83, 0.0, 0.0, 0))
        self.assertEqual(first.in_place, table.Measurement(28.86, 0.0, 0.0, 0))
        self.assertEqual(last.count, 33554432)
        self.assertEqual(last.out_of_place.time_us, 1223.0)  # printed without decimals
        self.assertAlmostEqual(last.in_place.busbw, 193.68)

    def test_busbw_is_algbw_times_allreduce_factor(self):
        # The sample's numbers are consistent with nccl-tests' formula 2(n-1)/n, n = 8.
        for r in self.t.rows:
            m = r.out_of_place
            if m.algbw >= 1:
                self.assertAlmostEqual(m.busbw / m.algbw, 2 * 7 / 8, delta=0.01)

    def test_footer_and_header(self):
        self.assertEqual(self.t.out_of_bounds, 0)
        self.assertIs(self.t.ok, True)
        self.assertAlmostEqual(self.t.avg_busbw, 39.7877)
        self.assertEqual(self.t.collective, "all_reduce_perf")
        self.assertEqual(self.t.params["minBytes"], "8")
        self.assertEqual(self.t.params["maxBytes"], "134217728")
        self.assertEqual(self.t.params["iters"], "20")
        self.assertEqual(self.t.params["warmup iters"], "5")
        self.assertEqual(self.t.columns[:5], ["size", "count", "type", "redop", "root"])

    def test_to_results_has_json_shape(self):
        r = self.t.to_results()[3]
        self.assertEqual(r["size"], 64)
        self.assertEqual(set(r), {"size", "count", "type", "redop", "root", "iters",
                                  "out_of_place", "in_place"})
        self.assertEqual(set(r["out_of_place"]), {"time_us", "algbw", "busbw", "wrong"})
        self.assertIsInstance(r["out_of_place"]["wrong"], int)


class InPlaceNotApplicableAndFailed(unittest.TestCase):
    """alltoall: in-place columns all N/A, 7 wrong elements at 64 KiB, FAILED footer."""

    @classmethod
    def setUpClass(cls):
        cls.t = table.parse_file(SAMPLES / "alltoall_inplace_na_failed.txt", strict=True)

    def test_rows(self):
        self.assertEqual([r.size for r in self.t.rows], [1024 << 2 * i for i in range(6)])
        for r in self.t.rows:
            self.assertIsNone(r.in_place)
            self.assertIsNotNone(r.out_of_place.time_us)
            self.assertEqual(r.redop, "none")

    def test_wrong_count_and_footer(self):
        wrong = {r.size: r.out_of_place.wrong for r in self.t.rows}
        self.assertEqual(wrong[65536], 7)
        self.assertEqual(sum(wrong.values()), 7)
        self.assertEqual(self.t.out_of_bounds, 7)
        self.assertIs(self.t.ok, False)
        self.assertAlmostEqual(self.t.avg_busbw, 4.00525)

    def test_results_in_place_is_null(self):
        self.assertTrue(all(r["in_place"] is None for r in self.t.to_results()))


class TruncatedWithoutCheck(unittest.TestCase):
    """-c 0 (#wrong N/A), in-place collapsed to one N/A, killed mid-row, no footer."""

    def setUp(self):
        self.t = table.parse_file(SAMPLES / "truncated_nocheck.txt")

    def test_complete_rows_kept(self):
        self.assertEqual([r.size for r in self.t.rows], [8, 64, 512])
        for r in self.t.rows:
            self.assertIsNone(r.out_of_place.wrong)  # N/A: not checked, not "0 wrong"
            self.assertIsNone(r.in_place)
        self.assertAlmostEqual(self.t.rows[0].out_of_place.time_us, 1.042)

    def test_no_footer_means_unknown(self):
        self.assertIsNone(self.t.ok)
        self.assertIsNone(self.t.out_of_bounds)
        self.assertIsNone(self.t.avg_busbw)

    def test_noise_and_truncated_line_are_reported(self):
        lines = [text for _, text in self.t.unparsed]
        self.assertEqual(len(lines), 2)
        self.assertIn("exited on signal 9", lines[0])
        self.assertTrue(lines[1].strip().startswith("4096"))

    def test_strict_rejects_the_truncated_row(self):
        text = (SAMPLES / "truncated_nocheck.txt").read_text()
        # The launcher's message is not row-like; only the cut row makes strict parsing fail.
        with self.assertRaisesRegex(table.ParseError, "line 10: 6 fields, expected 13"):
            table.parse(text, strict=True)


class OldLayout(unittest.TestCase):
    """nccl-tests before the root column: float "error" instead of #wrong, footers without #."""

    def test_header_decides_columns(self):
        t = table.parse_file(SAMPLES / "nccl_tests_old_format.txt", strict=True)
        self.assertEqual([r.size for r in t.rows], [8, 64, 512, 4096, 32768])
        r = t.rows[2]
        self.assertEqual((r.type, r.redop, r.root), ("float", "sum", -1))
        self.assertEqual(r.out_of_place.wrong, 1e-06)
        self.assertEqual(r.in_place, table.Measurement(18.54, 0.03, 0.04, 0.0))
        self.assertIs(t.ok, True)
        self.assertAlmostEqual(t.avg_busbw, 0.3996)


class OuroBenchOutput(unittest.TestCase):
    """ouro-bench's own stdout (captured, with the JSON it wrote in the same run): the parser
    must give back what the JSON holds, to the table's printed precision."""

    def check_against_json(self, stem):
        t = table.parse_file(SAMPLES / f"{stem}.txt", strict=True)
        data = json.loads((SAMPLES / f"{stem}.json").read_text())
        self.assertEqual(t.unparsed, [])
        self.assertEqual(t.ok, data["ok"])
        self.assertEqual(t.out_of_bounds, data["out_of_bounds"])
        self.assertAlmostEqual(t.avg_busbw, data["avg_busbw"], places=4)
        self.assertEqual(t.params["nranks"], str(data["nranks"]))
        got = t.to_results()
        self.assertEqual(len(got), len(data["results"]))
        for g, want in zip(got, data["results"]):
            for key in ("size", "count", "type", "redop", "root"):
                self.assertEqual(g[key], want[key], key)
            for placement in ("out_of_place", "in_place"):
                if want[placement] is None:
                    self.assertIsNone(g[placement])
                    continue
                for key, places in (("time_us", 2), ("algbw", 2), ("busbw", 2)):
                    # printed with 2 decimals: at most half a unit of the last digit off
                    self.assertLessEqual(abs(g[placement][key] - want[placement][key]),
                                         0.5 * 10 ** -places + 1e-9, (want["size"], key))
                self.assertEqual(g[placement]["wrong"], want[placement]["wrong"])
        return t

    def test_all_gather_both_placements(self):
        t = self.check_against_json("ouro_bench_all_gather_2ranks")
        self.assertTrue(all(r.in_place is not None for r in t.rows))

    def test_alltoall_without_check(self):
        t = self.check_against_json("ouro_bench_alltoall_3ranks_nocheck")
        self.assertTrue(all(r.out_of_place.wrong is None and r.in_place is None
                            for r in t.rows))


class EdgeCases(unittest.TestCase):
    HEADER = ("#       size         count      type   redop    root     time   algbw   busbw "
              "#wrong     time   algbw   busbw #wrong\n")

    def test_rank_tags_are_stripped(self):
        t = table.parse("[0]: " + self.HEADER
                        + "[0]:            8             2   float32     sum      -1     0.41"
                          "    0.02    0.02      0     0.40    0.02    0.02      0\n"
                        + "[0]: # Out of bounds values : 0 OK\n")
        self.assertEqual(len(t.rows), 1)
        self.assertIs(t.ok, True)

    def test_out_of_place_only(self):
        t = table.parse(self.HEADER + "  1024  256  float32  sum  -1  3.5  0.29  0.29  0\n")
        self.assertEqual(t.rows[0].out_of_place.time_us, 3.5)
        self.assertIsNone(t.rows[0].in_place)

    def test_in_place_only(self):
        t = table.parse(self.HEADER + "  1024  256  float32  sum  -1  N/A  3.5  0.29  0.29  0\n")
        self.assertIsNone(t.rows[0].out_of_place)
        self.assertEqual(t.rows[0].in_place.busbw, 0.29)

    def test_non_number_is_an_error(self):
        with self.assertRaisesRegex(table.ParseError, "time is 'fast'"):
            table.parse(self.HEADER + "  8  2  float32  sum  -1  fast  0  0  0  1  0  0  0\n",
                        strict=True)

    def test_empty_input(self):
        t = table.parse("")
        self.assertEqual((t.rows, t.ok, t.unparsed), ([], None, []))


if __name__ == "__main__":
    unittest.main(verbosity=2)

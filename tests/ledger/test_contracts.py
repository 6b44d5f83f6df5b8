"""eventsourcing's own recorder, factory, application and projection test cases, on LMDB."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import ClassVar

from eventsourcing.persistence import Tracking
from eventsourcing.tests import application as app_contract
from eventsourcing.tests import persistence as contract
from eventsourcing.tests import projection as projection_contract
from eventsourcing.utils import Environment
from lessonledger.ledger import (
    LMDBAggregateRecorder,
    LMDBApplicationRecorder,
    LMDBFactory,
    LMDBProcessRecorder,
    LMDBTrackingRecorder,
)
from lessonledger.ledger.lmdb_env import LMDBHome, acquire, release


class _TempHome:
    """Gives each test a fresh LMDB home and releases it afterwards."""

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="ll-contract-")
        self.home: LMDBHome = acquire(self.tmp + "/home", sync=False)
        super().setUp()  # type: ignore[misc]

    def tearDown(self) -> None:
        super().tearDown()  # type: ignore[misc]
        release(self.home)
        shutil.rmtree(self.tmp, ignore_errors=True)


class TestAggregateRecorder(_TempHome, contract.AggregateRecorderTestCase):
    def create_recorder(self) -> LMDBAggregateRecorder:
        return LMDBAggregateRecorder(self.home, "app.snapshots")


class TestApplicationRecorder(
    _TempHome, contract.ApplicationRecorderTestCase[LMDBApplicationRecorder]
):
    def create_recorder(self) -> LMDBApplicationRecorder:
        return LMDBApplicationRecorder(self.home, "app")

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


class TestTrackingRecorder(_TempHome, contract.TrackingRecorderTestCase):
    def create_recorder(self) -> LMDBTrackingRecorder:
        return LMDBTrackingRecorder(self.home, "view")


class TestProcessRecorder(_TempHome, contract.ProcessRecorderTestCase):
    def create_recorder(self) -> LMDBProcessRecorder:
        return LMDBProcessRecorder(self.home, "process")


class TestNonInterleaving(_TempHome, contract.NonInterleavingNotificationIDsBaseCase):
    def create_recorder(self) -> LMDBApplicationRecorder:
        return LMDBApplicationRecorder(self.home, "app")


class _ViewSubclass(LMDBTrackingRecorder):
    pass


class TestFactory(contract.InfrastructureFactoryTestCase[LMDBFactory]):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="ll-factory-")
        self.env = Environment(
            "TestCase",
            {"PERSISTENCE_MODULE": "lessonledger.ledger", "LMDB_PATH": self.tmp, "LMDB_SYNC": "n"},
        )
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def expected_factory_class(self) -> type[LMDBFactory]:
        return LMDBFactory

    def expected_aggregate_recorder_class(self) -> type[LMDBAggregateRecorder]:
        return LMDBAggregateRecorder

    def expected_application_recorder_class(self) -> type[LMDBApplicationRecorder]:
        return LMDBApplicationRecorder

    def expected_tracking_recorder_class(self) -> type[LMDBTrackingRecorder]:
        return LMDBTrackingRecorder

    def tracking_recorder_subclass(self) -> type[LMDBTrackingRecorder]:
        return _ViewSubclass

    def expected_process_recorder_class(self) -> type[LMDBProcessRecorder]:
        return LMDBProcessRecorder


class _EnvHome:
    """Points eventsourcing at a fresh LMDB home through the process environment."""

    env: ClassVar[dict[str, str]] = {}

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="ll-app-")
        self._saved = {k: os.environ.get(k) for k in ("PERSISTENCE_MODULE", "LMDB_PATH")}
        os.environ["PERSISTENCE_MODULE"] = "lessonledger.ledger"
        os.environ["LMDB_PATH"] = self.tmp
        # eventsourcing's projection cases read a class-level env.
        type(self).env = {"PERSISTENCE_MODULE": "lessonledger.ledger", "LMDB_PATH": self.tmp}
        super().setUp()  # type: ignore[misc]

    def tearDown(self) -> None:
        super().tearDown()  # type: ignore[misc]
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(self.tmp, ignore_errors=True)


class TestExampleApplication(_EnvHome, app_contract.ExampleApplicationTestCase):
    expected_factory_topic = "lessonledger.ledger.lmdb_recorders:LMDBFactory"


class LMDBEventCounters(LMDBTrackingRecorder, projection_contract.EventCountersView):
    """A tiny view: two counters and the checkpoint, in one transaction."""

    def __init__(self, home: LMDBHome, name: str) -> None:
        super().__init__(home, name)
        self._counters = home.db(f"{name}.counters")

    def _get(self, key: bytes) -> int:
        with self.home.env.begin() as txn:
            raw = txn.get(key, db=self._counters)
        return int.from_bytes(raw, "big") if raw else 0

    def _incr(self, key: bytes, tracking: Tracking) -> None:
        db = self._counters
        with self.home.env.begin(write=True) as txn:
            self._insert_tracking(txn, tracking)
            raw = txn.get(key, db=db)
            txn.put(key, ((int.from_bytes(raw, "big") if raw else 0) + 1).to_bytes(8, "big"), db=db)

    def get_created_event_counter(self) -> int:
        return self._get(b"created")

    def get_subsequent_event_counter(self) -> int:
        return self._get(b"subsequent")

    def incr_created_event_counter(self, tracking: Tracking) -> None:
        self._incr(b"created", tracking)

    def incr_subsequent_event_counter(self, tracking: Tracking) -> None:
        self._incr(b"subsequent", tracking)


class TestEventCountersView(_TempHome, projection_contract.EventCountersViewTestCase):
    def construct_event_counters_view(self) -> LMDBEventCounters:
        return LMDBEventCounters(self.home, "counters")


class TestProjectionRunner(_EnvHome, projection_contract.AggregateEventCountersProjectionTestCase):
    view_class = LMDBEventCounters


class TestEventSourcedProjection(_EnvHome, projection_contract.EventSourcedProjectionTestCase):
    pass


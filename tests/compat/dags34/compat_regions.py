"""A DAG whose tasks write state through Airflow 3.4's task SDK inside dynamic regions (compat stage).

A loop of three iterations (``refine``) holds an unmapped task (``refine.step``) and a mapped task
(``refine.work``, two map indexes per iteration: three rows at region_index 0, one per iteration's
expansion, told apart only by region_id; it also writes an asset key, so the asset's writer has a
region); a mapped task group (``per_table``, three tables); an asset key
written by a task; a task outside any region. Some keys are already expired, for the GC comparison.
"""

from datetime import datetime, timedelta

from airflow.sdk import DAG, NEVER_EXPIRE, Asset, LoopDecision, task, task_group

ORDERS = Asset(name="compat_regions_orders", uri="s3://compat/regions-orders")

with DAG("compat_regions", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):

    @task(outlets=[ORDERS])
    def plain(**context):
        context["task_state_store"].set("outside/any: region", {"plain": True}, retention=NEVER_EXPIRE)
        context["asset_state_store"].set("regions/watermark", {"written_by": "plain"})

    @task_group
    def refine():
        @task
        def step(*, loop, **context):
            state = context["task_state_store"]
            state.set("iteration", {"index": loop.index, "text": "Grüße <b>&</b>"})
            state.set("expired/in loop", loop.index, retention=timedelta(seconds=-30))
            return loop.index

        @task(outlets=[ORDERS])
        def work(item, *, loop, **context):
            state = context["task_state_store"]
            state.set("cursor", {"iteration": loop.index, "item": item})
            if item == "b":
                state.set("stale", item, retention=timedelta(seconds=-5))
            else:  # the asset key's writer: the last iteration's work, in its region at index 0
                context["asset_state_store"].set("regions/last work", {"iteration": loop.index})
            return item

        step() >> work.expand(item=["a", "b"])

    def three_times(*, loop):
        return LoopDecision(stop=loop.index >= 2, reason=f"iteration {loop.index} of 3")

    @task_group
    def per_table(table):
        @task
        def load(table, **context):
            context["task_state_store"].set("rows", {"table": table}, retention=NEVER_EXPIRE)
            context["task_state_store"].set("expired", table, retention=timedelta(seconds=-1))
            return table

        load(table)

    @task(outlets=[ORDERS])
    def publish(**context):
        context["asset_state_store"].set("regions/published", ["refine", "per_table"])

    loop = refine.loop(max_iterations=3, until=three_times)
    plain() >> loop >> per_table.expand(table=["orders", "users", "x y"]) >> publish()

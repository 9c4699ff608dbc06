"""The shape of every DAG of the Airflow 3.4 bench deployment (``bench/shape34.py``), for Airflow 3.4.0b2 to
serialize: ``bench/deployment.py --series 3.4`` stores what ``DagSerialization`` writes for it as each DAG's
serialized DAG, with the DAG's own id. Never run: the deployment's rows are generated in SQL.
"""

from datetime import datetime

from airflow.sdk import DAG, LoopDecision, task, task_group

with DAG("bench_regions", schedule="0 0 * * *", start_date=datetime(2026, 1, 1), catchup=False):

    @task
    def extract():
        pass

    @task
    def transform():
        pass

    @task_group
    def refine():
        @task
        def step(*, loop):
            return loop.index

        @task
        def work(item, *, loop):
            return item

        step() >> work.expand(item=["a", "b"])

    def gate(*, loop):  # the loop's gate task is named after this function: refine.gate
        return LoopDecision(stop=loop.index >= 2, reason=f"iteration {loop.index}")

    @task_group
    def per_table(table):
        @task
        def load(table):
            return table

        load(table)

    @task
    def load():
        pass

    @task
    def publish():
        pass

    loop = refine.loop(max_iterations=500, until=gate)
    extract() >> transform() >> loop >> per_table.expand(table=["a", "b", "c", "d"]) >> load() >> publish()

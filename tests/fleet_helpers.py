"""Test helpers over the fleet engine."""


def fleet_plan_report(m, g, wl, profile):
    """The plan report of the fleet engine's answer for ``wl`` at 2 req/s on ``g`` alone (TP 1, bf16) for a model
    and GPU that need not be in the catalog (``plan_fleet``'s model/gpus/profile_for), and its steady-state replica."""
    from planner.fleet import FleetQuestion, plan_fleet
    from planner.plan import plan
    from planner.plan_report import plan_report
    from planner.specs import Deployment

    fq = FleetQuestion(model_id=m.id, rate_per_s=2.0, prompt_tokens=wl.prompt_tokens, output_tokens=wl.output_tokens,
                       gpu_ids=(g.id,), tensor_parallels=(1,), pipeline_parallels=(1,), weight_dtype="bf16")
    fp = plan_fleet(fq, model=m, gpus=[g], profile_for=lambda _: profile)
    report = plan(m, g, Deployment.for_gpu(g), wl, profile)
    return plan_report(m, g, report, fp, profile)

package memory

import "errors"

func plan(in PlanInput) (Prediction, error) {
	return Prediction{}, errors.New("memory: plan not implemented yet")
}

/*
 * ARX's own (epsilon, delta) -> (k, beta) of SafePub, for tests/solver/test_differential_privacy.py:
 * runs org.deidentifier.arx.dp.ParameterCalculation (ARX 3.9.2, the build of ../shared/arx-side-by-side,
 * $ARXSIDE_WORK/classpath.txt) on a grid and prints one line per point.
 *
 * A point is (epsilon, epsilon_search, delta): epsilon_anonymization is epsilon itself when
 * epsilon_search is 0 (a generalization scheme fixed by the user), else the lower bound of
 * epsilon - epsilon_search in ARX's interval arithmetic, exactly as EDDifferentialPrivacy.initialize.
 *
 * Output, tab separated: epsilon epsilon_search delta epsilon_anonymization(hex) k beta(hex) beta
 * (hex as Double.toHexString, so the Python side compares bit for bit).
 *
 *   javac -cp "$(cat $ARXSIDE_WORK/classpath.txt)" -d /tmp/arx_dp ArxParameters.java
 *   java -cp "$(cat $ARXSIDE_WORK/classpath.txt):/tmp/arx_dp" ArxParameters
 */
import org.deidentifier.arx.dp.ParameterCalculation;
import org.deidentifier.arx.reliability.IntervalArithmeticDouble;

public class ArxParameters {

    private static void point(double epsilon, double search, double delta) throws Exception {
        double anon = epsilon;
        if (search > 0d) {
            IntervalArithmeticDouble ia = new IntervalArithmeticDouble();
            anon = ia.sub(ia.createInterval(epsilon), ia.createInterval(search)).lower;
        }
        ParameterCalculation calculation = new ParameterCalculation(anon, delta);
        System.out.println(epsilon + "\t" + search + "\t" + delta + "\t" + Double.toHexString(anon) + "\t"
                           + calculation.getK() + "\t" + Double.toHexString(calculation.getBeta()) + "\t"
                           + calculation.getBeta());
    }

    public static void main(String[] args) throws Exception {
        double[] epsilons = {0.1, 0.25, 0.5, 0.693, 1.0, 1.5, 2.0, 3.0};
        double[] deltas = {1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8};
        for (double epsilon : epsilons) {
            for (double delta : deltas) {
                point(epsilon, 0d, delta);
            }
        }
        // with a data-dependent search: the GUI's default (epsilon 2, 10% for the search) and the grid
        double[] searched = {0.5, 1.0, 2.0};
        for (double epsilon : searched) {
            for (double delta : new double[] {1e-5, 1e-6}) {
                point(epsilon, epsilon * 0.1, delta);
            }
        }
    }
}
